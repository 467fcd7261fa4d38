/* room outputs/: the plots and pages a run leaves; includes the engine, run/ and outputs/. */
/* page_data.h: what page.c and page_grid.c share to make the pages' data
 * (page.h): the folder's files as JSON, and the HTML around it. */
#ifndef ATTNLAB_PAGE_DATA_H
#define ATTNLAB_PAGE_DATA_H

#include <cJSON.h>
#include <stdbool.h>

#include "options.h"
#include "page.h"

/* dir/name's text, at most max bytes; NULL when it is missing or not a regular file. */
char *page_read_text(const char *dir, const char *name, size_t max);
/* path: the page of data (its "kind" says which page.js draws), titled title. */
int page_html(const char *path, const char *title, cJSON *data, Err *e);
/* One line of the page's "missing or incomplete" list. */
void page_note(cJSON *notes, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* metrics.jsonl's columns (page.c); *last the last step logged (0: none). */
cJSON *page_metrics(const char *dir, bool full, long *last, cJSON *notes);
/* config.json as a Config; *json the file parsed (NULL when missing). -1
 * when it is missing or not a run's config (cfg then holds the defaults). */
int page_config(const char *dir, Config *cfg, cJSON **json);
/* {state, step, steps} of a run folder, read from its files and its lock. */
cJSON *page_folder_status(const char *dir, long last, long steps);

#endif
