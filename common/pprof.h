/*
 * pprof writer: builds a perftools.profiles.Profile (proto/profile.proto)
 * with deduplicated strings, functions and locations, and writes it gzip'd.
 * Field order: everything else first, the samples last, so a reader (the
 * redactor) knows every string and table entry when a sample comes.
 * Used by the in-process runtime agent (stack samples, heap profiles) and by
 * the daemon for captures it makes itself.
 *
 * Caps: at most PP_MAX_ENTRIES strings, functions, locations, mappings and
 * samples each; past the cap the add call returns -ENOSPC and the builder
 * stays valid (the caller counts the loss). All ids are 1-based.
 */
#ifndef PD_PPROF_H
#define PD_PPROF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define PP_MAX_ENTRIES (1u << 20)
#define PP_MAX_VALUES  8
#define PP_MAX_LABELS  8

struct pp_builder;

/* A sample label: a string label when str != NULL, else a numeric one. */
struct pp_label {
	const char *key;
	const char *str;
	int64_t num;
	const char *num_unit; /* may be NULL */
};

int pp_new(struct pp_builder **out);
void pp_free(struct pp_builder *b);

/* Index of s in the string table (adding it); "" is index 0. NULL -> 0. */
int64_t pp_str(struct pp_builder *b, const char *s);

/* Sample types, in value order. At most PP_MAX_VALUES. */
int pp_add_sample_type(struct pp_builder *b, const char *type, const char *unit);
int pp_set_period(struct pp_builder *b, const char *type, const char *unit, int64_t period);
int pp_set_default_sample_type(struct pp_builder *b, const char *type);
void pp_set_time(struct pp_builder *b, int64_t time_nanos, int64_t duration_nanos);
int pp_add_comment(struct pp_builder *b, const char *comment);

/* build_id is the hex string form, or NULL. Mappings are not deduplicated. */
int pp_add_mapping(struct pp_builder *b, uint64_t start, uint64_t limit,
		   uint64_t file_offset, const char *file, const char *build_id,
		   bool has_functions, bool has_line_numbers, uint64_t *id);

/* Deduplicated by (name, file). system_name NULL means the same as name. */
int pp_add_function(struct pp_builder *b, const char *name, const char *system_name,
		    const char *file, int64_t start_line, uint64_t *id);

/*
 * Deduplicated by (mapping_id, address); the first call for an address
 * decides its function and line. function_id 0 adds a location with no line
 * (an unsymbolised address).
 */
int pp_add_location(struct pp_builder *b, uint64_t mapping_id, uint64_t address,
		    uint64_t function_id, int64_t line, uint64_t *id);

/*
 * Add a sample: locs[0] is the leaf. nvalues must equal the number of sample
 * types. Samples are not merged; callers aggregate first.
 */
int pp_add_sample(struct pp_builder *b, const uint64_t *locs, size_t nlocs,
		  const int64_t *values, size_t nvalues,
		  const struct pp_label *labels, size_t nlabels);

/* Serialise, gzip (zlib's default level) and write to fd. *written (may
 * be NULL) gets the bytes. */
int pp_write_gz(struct pp_builder *b, int fd, uint64_t *written);

/*
 * The same at a zlib level (0-9, or -1 for the default). PP_GZ_HOP is what
 * a runtime writes to profilingd: stored blocks, still a gzip file any
 * reader opens. The daemon's redactor inflates it and deflates what it
 * keeps anyway, so compressing on this hop costs the app's CPU twice over
 * (bench/redact_throughput's 16 MB profile: 640 ms of zlib level 6 in the
 * app, against 18 ms stored) and the redactor's inflate a third (issue
 * #18). The price: the file on the hop is the profile's own size, which
 * [limits] max_result_bytes and the redactor's input cap count.
 */
#define PP_GZ_HOP 0
int pp_write_gz_level(struct pp_builder *b, int fd, int level, uint64_t *written);

/* Serialise uncompressed into a malloc'd buffer (for tests and the redactor). */
int pp_serialize(struct pp_builder *b, uint8_t **out, size_t *len);

#endif
