/*
 * Flame graph SVG, written by profctl itself: the stacks merged into a
 * tree (siblings sorted by name, as flamegraph.pl does), each frame's width
 * proportional to its inclusive value, the root at the bottom. The file is
 * self-contained: a few lines of embedded script give click-to-zoom and
 * hover details; without script it is still a complete picture.
 */
#include "pctl.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#define SVG_W 1200.0
#define PAD 10.0
#define FRAME_H 16.0
#define TOP 56.0
#define BOTTOM 28.0
#define MIN_PX 0.1     /* narrower frames (and what is above them) are left out */
#define CHAR_PX 7.0    /* an 11 px monospace glyph, rounded up */

struct node {
	uint32_t name;
	uint32_t depth;
	int64_t value;
	size_t first, next; /* children list; 0 = none (node 0 is the root) */
};

struct tree {
	struct node *v;
	size_t n, cap;
	uint32_t maxdepth;
};

static long add_child(struct tree *t, size_t parent, uint32_t name)
{
	for (size_t c = t->v[parent].first; c; c = t->v[c].next)
		if (t->v[c].name == name)
			return (long)c;
	if (t->n == PCTL_MAX_NODES)
		return -E2BIG;
	if (t->n == t->cap) {
		size_t nc = t->cap * 2;
		struct node *nv = realloc(t->v, nc * sizeof(*nv));
		if (!nv)
			return -ENOMEM;
		t->v = nv;
		t->cap = nc;
	}
	struct node *c = &t->v[t->n];
	c->name = name;
	c->depth = t->v[parent].depth + 1;
	c->value = 0;
	c->first = 0;
	c->next = t->v[parent].first;
	t->v[parent].first = t->n;
	if (c->depth > t->maxdepth)
		t->maxdepth = c->depth;
	return (long)t->n++;
}

/* Write s as XML character data: escaped, control bytes and invalid UTF-8 as '?'. */
static void xml_put(FILE *f, const char *s, size_t max)
{
	const unsigned char *u = (const unsigned char *)s;
	size_t i = 0;
	while (u[i] && i < max) {
		unsigned c = u[i];
		size_t len = c < 0x80 ? 1 : (c & 0xe0) == 0xc0 ? 2 : (c & 0xf0) == 0xe0 ? 3
			   : (c & 0xf8) == 0xf0 ? 4 : 0;
		bool ok = len > 0 && i + len <= max && (len > 1 || c >= 0x20 || c == '\t');
		for (size_t k = 1; ok && k < len; k++)
			ok = (u[i + k] & 0xc0) == 0x80;
		/* Overlong forms, surrogates and U+FFFE/U+FFFF are not XML text either. */
		if (ok && len == 2 && c < 0xc2)
			ok = false;
		if (ok && len == 3 && ((c == 0xe0 && u[i + 1] < 0xa0) || (c == 0xed && u[i + 1] >= 0xa0) ||
				       (c == 0xef && u[i + 1] == 0xbf && u[i + 2] >= 0xbe)))
			ok = false;
		if (ok && len == 4 && ((c == 0xf0 && u[i + 1] < 0x90) || c > 0xf4 ||
				       (c == 0xf4 && u[i + 1] >= 0x90)))
			ok = false;
		if (!ok) {
			fputc('?', f);
			i++;
			continue;
		}
		switch (c) {
		case '&': fputs("&amp;", f); break;
		case '<': fputs("&lt;", f); break;
		case '>': fputs("&gt;", f); break;
		case '"': fputs("&quot;", f); break;
		case '\'': fputs("&apos;", f); break;
		default: fwrite(u + i, 1, len, f); break;
		}
		i += len;
	}
}

/* How many bytes of s fit in px, cut on a character boundary; SIZE_MAX: all. */
static size_t label_len(const char *s, double px)
{
	double chars = (px - 6) / CHAR_PX;
	size_t len = strlen(s);
	if (chars < 3)
		return 0;
	if ((double)len <= chars)
		return SIZE_MAX;
	size_t n = (size_t)chars - 2;
	while (n > 0 && ((unsigned char)s[n] & 0xc0) == 0x80)
		n--;
	return n;
}

static void color(const char *s, int rgb[3])
{
	uint32_t h = 2166136261u;
	for (; *s; s++)
		h = (h ^ (uint8_t)*s) * 16777619u;
	rgb[0] = 205 + (int)(h % 50);
	rgb[1] = (int)((h >> 8) % 230);
	rgb[2] = (int)((h >> 20) % 55);
}

static int cmp_name_ctx_sort(const void *a, const void *b, void *ctx)
{
	const struct tree *t = ((void **)ctx)[0];
	char *const *names = ((void **)ctx)[1];
	return strcmp(names[t->v[*(const size_t *)a].name], names[t->v[*(const size_t *)b].name]);
}

static const char script[] =
	"<script type=\"text/ecmascript\"><![CDATA[\n"
	"var W=1200,PAD=10,CH=7,fr=[],det,unz;\n"
	"function lab(g,x,w){var t=g.lastChild,n=g.getAttribute('data-n'),c=Math.floor((w-6)/CH);"
	"t.setAttribute('x',x+3);t.textContent=c<3?'':(n.length<=c?n:n.substr(0,c-2)+'..');}\n"
	"function put(g,x,w){var r=g.getElementsByTagName('rect')[0];g.style.display='';"
	"r.setAttribute('x',x);r.setAttribute('width',w);lab(g,x,w);}\n"
	"function zoom(z){var zx=z.ox,zw=z.ow,zd=z.d,s=(W-2*PAD)/zw,e=1e-6;"
	"for(var i=0;i<fr.length;i++){var g=fr[i];"
	"if(g.d<zd){if(g.ox<=zx+e&&g.ox+g.ow>=zx+zw-e)put(g,PAD,W-2*PAD);else g.style.display='none';}"
	"else if(g.ox<zx-e||g.ox+g.ow>zx+zw+e||g.ow*s<0.1)g.style.display='none';"
	"else put(g,(g.ox-zx)*s+PAD,g.ow*s);}unz.style.display='';}\n"
	"function unzoom(){for(var i=0;i<fr.length;i++)put(fr[i],fr[i].ox,fr[i].ow);"
	"unz.style.display='none';}\n"
	"function init(){det=document.getElementById('details');unz=document.getElementById('unzoom');"
	"var gs=document.getElementsByTagName('g');for(var i=0;i<gs.length;i++){var g=gs[i];"
	"if(g.getAttribute('class')!='f')continue;var r=g.getElementsByTagName('rect')[0];"
	"g.ox=+r.getAttribute('x');g.ow=+r.getAttribute('width');g.d=+g.getAttribute('data-d');"
	"g.onclick=function(){zoom(this);};"
	"g.onmouseover=function(){det.textContent=this.getElementsByTagName('title')[0].textContent;};"
	"g.onmouseout=function(){det.textContent=' ';};fr.push(g);}"
	"unz.onclick=unzoom;}\n"
	"window.addEventListener('load',init);\n"
	"]]></script>\n";

static void emit(FILE *f, const struct pctl_profile *p, const struct tree *t, size_t i, double x,
		 double w, double height)
{
	const struct node *nd = &t->v[i];
	const char *name = i == 0 ? "all" : p->names[nd->name];
	double y = height - BOTTOM - (nd->depth + 1) * FRAME_H;
	char val[48];
	int rgb[3];

	pctl_fmt_value(p, nd->value, val, sizeof(val));
	color(name, rgb);
	fprintf(f, "<g class=\"f\" data-d=\"%u\" data-n=\"", nd->depth);
	xml_put(f, name, SIZE_MAX);
	fprintf(f, "\"><title>");
	xml_put(f, name, SIZE_MAX);
	fprintf(f, " (%s %s, %.2f%%)</title><rect x=\"%.3f\" y=\"%.1f\" width=\"%.3f\" height=\"%.1f\""
		" fill=\"rgb(%d,%d,%d)\" rx=\"2\"/><text x=\"%.2f\" y=\"%.1f\">", val, p->sample_type,
		p->total ? 100.0 * (double)nd->value / (double)p->total : 0.0, x, y, w, FRAME_H - 1,
		rgb[0], rgb[1], rgb[2], x + 3, y + 11.5);
	size_t l = label_len(name, w);
	if (l == SIZE_MAX) {
		xml_put(f, name, SIZE_MAX);
	} else if (l > 0) {
		xml_put(f, name, l);
		fputs("..", f);
	}
	fputs("</text></g>\n", f);
}

int pctl_flame_svg(const struct pctl_profile *p, const char *title, FILE *f, size_t *nframes)
{
	struct tree t = { .cap = 1024 };
	size_t *order = NULL, *stack = NULL, nstack = 0, emitted = 0;
	double *xs = NULL;
	int r = 0;

	if (!(t.v = malloc(t.cap * sizeof(*t.v))))
		return -ENOMEM;
	t.v[0] = (struct node){ 0 };
	t.n = 1;
	for (size_t i = 0; i < p->nstacks; i++) {
		const struct pctl_stack *s = &p->stacks[i];
		size_t cur = 0;
		if (s->value <= 0)
			continue;
		t.v[0].value += s->value;
		for (uint32_t j = 0; j < s->n; j++) {
			long c = add_child(&t, cur, p->frames[s->off + j]);
			if (c < 0) {
				r = (int)c;
				goto out;
			}
			cur = (size_t)c;
			t.v[cur].value += s->value;
		}
	}
	double height = TOP + (t.maxdepth + 1) * FRAME_H + BOTTOM;
	double scale = t.v[0].value > 0 ? (SVG_W - 2 * PAD) / (double)t.v[0].value : 0;

	fprintf(f, "<?xml version=\"1.0\" encoding=\"UTF-8\" standalone=\"no\"?>\n"
		"<svg xmlns=\"http://www.w3.org/2000/svg\" version=\"1.1\" width=\"%.0f\" "
		"height=\"%.0f\" viewBox=\"0 0 %.0f %.0f\">\n"
		"<style>text{font-family:monospace;font-size:11px;fill:#000}"
		" .f:hover rect{stroke:#000;stroke-width:0.5;cursor:pointer}"
		" #title{font-size:17px} #unzoom{cursor:pointer}</style>\n%s"
		"<rect x=\"0\" y=\"0\" width=\"%.0f\" height=\"%.0f\" fill=\"#f8f8f0\"/>\n"
		"<text id=\"title\" x=\"%.0f\" y=\"24\" text-anchor=\"middle\">",
		SVG_W, height, SVG_W, height, script, SVG_W, height, SVG_W / 2);
	xml_put(f, title ? title : "Flame graph", SIZE_MAX);
	fprintf(f, "</text>\n<text x=\"%.0f\" y=\"44\">%s, %s; click a frame to zoom</text>\n"
		"<text id=\"unzoom\" x=\"%.0f\" y=\"44\" text-anchor=\"end\" style=\"display:none\">"
		"Reset zoom</text>\n<text id=\"details\" x=\"%.0f\" y=\"%.0f\"> </text>\n",
		PAD, p->sample_type, p->unit[0] ? p->unit : "count", SVG_W - PAD, PAD, height - 10);

	/* Depth first, children by name; x offsets in value units. */
	order = malloc(t.n * sizeof(*order));
	stack = malloc(t.n * sizeof(*stack));
	xs = malloc(t.n * sizeof(*xs));
	if (!order || !stack || !xs) {
		r = -ENOMEM;
		goto out;
	}
	stack[nstack++] = 0;
	xs[0] = 0;
	char **names = p->names;
	void *ctx[2] = { &t, names };
	while (nstack) {
		size_t i = stack[--nstack];
		double w = (double)t.v[i].value * scale;
		if (w < MIN_PX)
			continue;
		emit(f, p, &t, i, PAD + xs[i] * scale, w, height);
		emitted++;
		size_t nc = 0;
		for (size_t c = t.v[i].first; c; c = t.v[c].next)
			order[nc++] = c;
		qsort_r(order, nc, sizeof(*order), cmp_name_ctx_sort, ctx);
		double x = xs[i];
		for (size_t k = 0; k < nc; k++) {
			xs[order[k]] = x;
			x += (double)t.v[order[k]].value;
		}
		/* Pushed in reverse so that they come out in name order. */
		for (size_t k = nc; k > 0; k--)
			stack[nstack++] = order[k - 1];
	}
	fputs("</svg>\n", f);
	if (nframes)
		*nframes = emitted;
	if (ferror(f))
		r = -EIO;
out:
	free(order);
	free(stack);
	free(xs);
	free(t.v);
	return r;
}
