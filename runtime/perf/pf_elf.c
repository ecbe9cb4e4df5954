/*
 * A function's file offset in an ELF file, for a uprobe (pf.h). The
 * kernel places a uprobe at a file offset, not at a virtual address, so
 * a symbol's st_value is moved from its PT_LOAD segment's addresses to
 * that segment's place in the file: st_value - p_vaddr + p_offset.
 */
#include "pf.h"

#include <errno.h>
#include <gelf.h>
#include <libelf.h>
#include <stdio.h>
#include <string.h>

/* The executable PT_LOAD segment that holds vaddr; 0 or -ENOENT. */
static int vaddr_to_offset(Elf *e, uint64_t vaddr, uint64_t *off)
{
	size_t n;
	if (elf_getphdrnum(e, &n) != 0)
		return -ENOEXEC;
	for (size_t i = 0; i < n; i++) {
		GElf_Phdr ph;
		if (!gelf_getphdr(e, (int)i, &ph) || ph.p_type != PT_LOAD || !(ph.p_flags & PF_X))
			continue;
		if (vaddr >= ph.p_vaddr && vaddr - ph.p_vaddr < ph.p_filesz) {
			*off = vaddr - ph.p_vaddr + ph.p_offset;
			return 0;
		}
	}
	return -ENOENT;
}

/* The defined function sym in section scn (a SYMTAB or DYNSYM); 0 or -ENOENT. */
static int find_in(Elf *e, Elf_Scn *scn, const GElf_Shdr *sh, const char *sym, uint64_t *value)
{
	Elf_Data *d = elf_getdata(scn, NULL);
	if (!d || !sh->sh_entsize)
		return -ENOENT;
	size_t count = sh->sh_size / sh->sh_entsize;
	for (size_t i = 0; i < count; i++) {
		GElf_Sym s;
		if (!gelf_getsym(d, (int)i, &s))
			break;
		if (GELF_ST_TYPE(s.st_info) != STT_FUNC && GELF_ST_TYPE(s.st_info) != STT_GNU_IFUNC)
			continue;
		if (s.st_shndx == SHN_UNDEF || !s.st_value)
			continue;
		const char *name = elf_strptr(e, sh->sh_link, s.st_name);
		if (!name)
			continue;
		/* .dynsym names may carry a version ("f@@V"): compare the name part. */
		size_t l = strlen(sym);
		if (strncmp(name, sym, l) || (name[l] && name[l] != '@'))
			continue;
		*value = s.st_value;
		return 0;
	}
	return -ENOENT;
}

int pf_elf_symbol_offset(int fd, const char *sym, uint64_t *off, char *why, size_t whylen)
{
	int r = -ENOENT;
	uint64_t value = 0;

	if (fd < 0 || !sym || !*sym || !off)
		return -EINVAL;
	if (elf_version(EV_CURRENT) == EV_NONE)
		return -ENOSYS;
	Elf *e = elf_begin(fd, ELF_C_READ_MMAP, NULL);
	if (!e || elf_kind(e) != ELF_K_ELF) {
		snprintf(why, whylen, "not an ELF file");
		r = -ENOEXEC;
		goto out;
	}
	/* .symtab first: it names static functions too; then .dynsym. */
	for (int pass = 0; pass < 2 && r == -ENOENT; pass++) {
		Elf_Scn *scn = NULL;
		while (r == -ENOENT && (scn = elf_nextscn(e, scn))) {
			GElf_Shdr sh;
			if (!gelf_getshdr(scn, &sh) ||
			    sh.sh_type != (pass == 0 ? SHT_SYMTAB : SHT_DYNSYM))
				continue;
			r = find_in(e, scn, &sh, sym, &value);
		}
	}
	if (r < 0) {
		snprintf(why, whylen, "no function named '%s' in its symbol tables", sym);
		goto out;
	}
	if ((r = vaddr_to_offset(e, value, off)) < 0)
		snprintf(why, whylen, "symbol '%s' (0x%llx) lies in no executable segment", sym,
			 (unsigned long long)value);
out:
	if (e)
		elf_end(e);
	return r;
}

int pf_elf_check_offset(int fd, uint64_t off, char *why, size_t whylen)
{
	size_t n;
	int r = -ENOENT;
	if (fd < 0)
		return -EINVAL;
	if (elf_version(EV_CURRENT) == EV_NONE)
		return -ENOSYS;
	Elf *e = elf_begin(fd, ELF_C_READ_MMAP, NULL);
	if (!e || elf_kind(e) != ELF_K_ELF || elf_getphdrnum(e, &n) != 0) {
		snprintf(why, whylen, "not an ELF file");
		if (e)
			elf_end(e);
		return -ENOEXEC;
	}
	for (size_t i = 0; i < n && r; i++) {
		GElf_Phdr ph;
		if (gelf_getphdr(e, (int)i, &ph) && ph.p_type == PT_LOAD && (ph.p_flags & PF_X) &&
		    off >= ph.p_offset && off - ph.p_offset < ph.p_filesz)
			r = 0;
	}
	if (r)
		snprintf(why, whylen, "offset 0x%llx lies in no executable segment",
			 (unsigned long long)off);
	elf_end(e);
	return r;
}

int pf_elf_build_id(int fd, char *hex, size_t n)
{
	size_t np;
	int r = -ENOENT;
	if (fd < 0 || !hex || n < 3)
		return -EINVAL;
	if (elf_version(EV_CURRENT) == EV_NONE)
		return -ENOSYS;
	Elf *e = elf_begin(fd, ELF_C_READ_MMAP, NULL);
	if (!e || elf_kind(e) != ELF_K_ELF || elf_getphdrnum(e, &np) != 0) {
		if (e)
			elf_end(e);
		return -ENOEXEC;
	}
	/* The GNU build-id note, in a PT_NOTE segment (what the loader maps). */
	for (size_t i = 0; i < np && r; i++) {
		GElf_Phdr ph;
		if (!gelf_getphdr(e, (int)i, &ph) || ph.p_type != PT_NOTE)
			continue;
		Elf_Data *d = elf_getdata_rawchunk(e, (int64_t)ph.p_offset, ph.p_filesz, ELF_T_NHDR);
		size_t off = 0, name_off, desc_off;
		GElf_Nhdr nh;
		while (d && r && (off = gelf_getnote(d, off, &nh, &name_off, &desc_off)) > 0) {
			if (nh.n_type != NT_GNU_BUILD_ID || nh.n_namesz != 4 ||
			    memcmp((const char *)d->d_buf + name_off, "GNU", 4))
				continue;
			if (nh.n_descsz == 0 || 2 * (size_t)nh.n_descsz + 1 > n)
				continue;
			const unsigned char *b = (const unsigned char *)d->d_buf + desc_off;
			for (size_t k = 0; k < nh.n_descsz; k++)
				snprintf(hex + 2 * k, 3, "%02x", b[k]);
			r = 0;
		}
	}
	elf_end(e);
	return r;
}
