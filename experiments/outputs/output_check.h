/* room outputs/: the plots and pages a run leaves; includes the engine, run/ and outputs/. */
/* output_check.h: the checks on the names a command will write, made before any
 * training or analysis starts, so that a name the end of the work cannot use
 * fails at once rather than after it.
 *
 *   - A name that PLplot or a page will print (a run's, a grid's, a label)
 *     must be valid UTF-8: PLplot refuses a malformed string.
 *   - A folder written into must be one, or be makeable, and be writable.
 *   - An output file a user names (./report --out) is never one of a run's
 *     own files (RUN_OWN_FILES in a folder holding a config.json), and never
 *     replaces a file that is not a page (an attnlab page, or HTML) unless
 *     asked (--force); it cannot be a folder. */
#ifndef ATTNLAB_OUTPUTS_H
#define ATTNLAB_OUTPUTS_H

#include <stdbool.h>
#include <stddef.h>

#include "util.h"

/* The files a run folder holds of its own: what no output path may replace. */
extern const char *const RUN_OWN_FILES[];

/* -1 with e set ("<what> <name>: not valid UTF-8 (byte N)") when name is not. */
int output_name_check(const char *what, const char *name, Err *e);
/* dir is a folder this process can write into, or one that can be made
 * (its nearest existing ancestor a writable folder). hint_flag (e.g.
 * "--out DIR") goes into the hint when it is not. */
int output_dir_check(const char *what, const char *dir, const char *hint_flag, Err *e);
/* path may be written as a page: not a folder, not a run's own file, not an
 * existing file other than a page (unless force), in a writable folder. */
int output_page_check(const char *what, const char *path, bool force, Err *e);
/* Whether name (a file's last component) is one of RUN_OWN_FILES. */
bool output_is_run_file(const char *name);

#endif
