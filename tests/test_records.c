/* test_records.c: what the pages read of a run folder (experiments/page.h)
 * and the bounded line reader (experiments/lines.h): numbers out of a long's
 * range are never cast (UBSan's float-cast-overflow in make check-asan), the
 * state is the run's own record, an over-long line is an error naming it. */
#include <cJSON.h>
#include <check.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "lines.h"
#include "page_data.h"
#include "run.h"

static void put(const char *dir, const char *name, const char *text) {
    char path[1200];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    fputs(text, f);
    fclose(f);
}

static void clean(const char *dir) {
    char cmd[1300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    ck_assert_int_eq(system(cmd), 0);
}

static const char *state_of(const cJSON *st, double *step) {
    *step = cJSON_GetObjectItem(st, "step")->valuedouble;
    return cJSON_GetObjectItem(st, "state")->valuestring;
}

START_TEST(test_whole_in_range) {
    long x = 7;
    ck_assert(whole_in_range(20, 0, LONG_MAX, &x) && x == 20);
    ck_assert(!whole_in_range(1e300, 0, LONG_MAX, &x));
    ck_assert(!whole_in_range(-1e300, LONG_MIN, LONG_MAX, &x));
    ck_assert(!whole_in_range(9223372036854775808.0, 0, LONG_MAX, &x)); /* 2^63: one past */
    ck_assert(!whole_in_range(NAN, 0, 10, &x) && !whole_in_range(INFINITY, 0, 10, &x));
    ck_assert(!whole_in_range(2.5, 0, 10, &x) && !whole_in_range(11, 0, 10, &x) && !whole_in_range(-1, 0, 10, &x));
    ck_assert(whole_in_range(9223372036854774784.0, 0, LONG_MAX, &x) && x == 9223372036854774784L);
}
END_TEST

/* A step of 1e300 in metrics.jsonl and result.json: skipped and noted, never cast. */
START_TEST(test_steps_out_of_range) {
    char dir[] = "/tmp/attnlab_records_XXXXXX";
    ck_assert_ptr_nonnull(mkdtemp(dir));
    put(dir, "metrics.jsonl", "{\"step\": 10, \"loss\": 1.0, \"val_bpb\": 2.0}\n{\"step\": 1e300, \"loss\": 1.0}\n"
                              "{\"step\": -1e300}\n");
    put(dir, "result.json", "{\"status\": \"diverged\", \"step\": 1e300, \"diverged_step\": 1e300}\n");
    cJSON *notes = cJSON_CreateArray();
    long last;
    cJSON *m = page_metrics(dir, true, &last, notes);
    ck_assert_int_eq(last, 10);
    ck_assert_int_eq(cJSON_GetArraySize(cJSON_GetObjectItem(m, "step")), 1);
    ck_assert(strstr(cJSON_GetArrayItem(notes, 0)->valuestring, "2 lines not read"));
    cJSON *st = page_folder_status(dir, last, 20);
    double step;
    ck_assert_str_eq(state_of(st, &step), "diverged");
    ck_assert(step == 10); /* the last step logged, not LONG_MIN */
    cJSON_Delete(st);
    /* the record's own numbers too */
    put(dir, "state.json", "{\"state\": \"failed\", \"step\": 1e300, \"steps\": -1e300, \"why\": \"disk full\"}\n");
    st = page_folder_status(dir, last, 20);
    ck_assert_str_eq(state_of(st, &step), "failed");
    ck_assert(step == 10 && cJSON_GetObjectItem(st, "steps")->valuedouble == 20);
    ck_assert_str_eq(cJSON_GetObjectItem(st, "why")->valuestring, "disk full");
    cJSON_Delete(st);
    cJSON_Delete(m);
    cJSON_Delete(notes);
    clean(dir);
}
END_TEST

/* "running" believed only from the process the record names: this one, or the lock's holder. */
START_TEST(test_running_from_the_record) {
    char dir[] = "/tmp/attnlab_records_XXXXXX", text[200];
    ck_assert_ptr_nonnull(mkdtemp(dir));
    snprintf(text, sizeof text, "{\"state\": \"running\", \"step\": 5, \"steps\": 20, \"pid\": %ld}\n", (long)getpid());
    put(dir, "state.json", text);
    double step;
    cJSON *st = page_folder_status(dir, 5, 20);
    ck_assert_str_eq(state_of(st, &step), "running");
    cJSON_Delete(st);
    /* the folder locked by this process (./spectrum's case), the record naming another: not running */
    Err e;
    int lock = run_lock(dir, &e);
    ck_assert_int_ge(lock, 0);
    put(dir, "state.json", "{\"state\": \"running\", \"step\": 5, \"steps\": 20, \"pid\": 999999999}\n");
    st = page_folder_status(dir, 5, 20);
    ck_assert_str_eq(state_of(st, &step), "stopped");
    cJSON_Delete(st);
    put(dir, "state.json", "{\"state\": \"done\", \"step\": 20, \"steps\": 20, \"pid\": 1}\n");
    st = page_folder_status(dir, 20, 20);
    ck_assert_str_eq(state_of(st, &step), "done"); /* a lock held is not "running" */
    cJSON_Delete(st);
    run_unlock(lock);
    clean(dir);
}
END_TEST

START_TEST(test_line_reader_bounded) {
    char dir[] = "/tmp/attnlab_records_XXXXXX", path[1200];
    ck_assert_ptr_nonnull(mkdtemp(dir));
    snprintf(path, sizeof path, "%s/lines", dir);
    FILE *f = fopen(path, "w");
    fputs("one\ntwo\n", f);
    for (int i = 0; i < 100; i++) fputc('x', f);
    fputs("\nfour", f);
    fclose(f);
    LineReader r;
    Err e;
    ck_assert_int_eq(line_open(&r, path, 64, &e), 0);
    ck_assert_int_eq(line_next(&r, &e), 1);
    ck_assert(r.len == 4 && !strcmp(r.line, "one\n"));
    ck_assert_int_eq(line_next(&r, &e), 1);
    ck_assert_int_eq(line_next(&r, &e), -1);
    ck_assert_msg(strstr(e.msg, "line 3: longer than 64 bytes"), "%s", e.msg);
    line_close(&r);
    /* exactly the bound, and a last line without its newline */
    f = fopen(path, "w");
    for (int i = 0; i < 63; i++) fputc('y', f);
    fputs("\nend", f);
    fclose(f);
    ck_assert_int_eq(line_open(&r, path, 64, &e), 0);
    ck_assert_int_eq(line_next(&r, &e), 1);
    ck_assert_int_eq((int)r.len, 64);
    ck_assert_int_eq(line_next(&r, &e), 1);
    ck_assert_str_eq(r.line, "end");
    ck_assert_int_eq(line_next(&r, &e), 0);
    line_close(&r);
    /* a folder cannot be read as lines: refused, not taken for an empty file */
    ck_assert_int_eq(line_open(&r, dir, 64, &e), -1);
    clean(dir);
}
END_TEST

Suite *records_suite(void) {
    Suite *s = suite_create("records");
    TCase *tc = tcase_create("records");
    tcase_add_test(tc, test_whole_in_range);
    tcase_add_test(tc, test_steps_out_of_range);
    tcase_add_test(tc, test_running_from_the_record);
    tcase_add_test(tc, test_line_reader_bounded);
    suite_add_tcase(s, tc);
    return s;
}
