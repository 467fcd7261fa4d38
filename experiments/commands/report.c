/* report.c: ./report DIR ... [--out FILE]
 *
 * One page comparing run folders and grids (experiments/outputs/page.h): their
 * validation curves on one chart, the runs grouped by the options that
 * differ between them, and links to each run's and grid's own page (written
 * where a folder has none). Trains and reads no model: only the folders'
 * small files. */
#include <stdio.h>

#include "args.h"
#include "interrupt.h"
#include "output_check.h"
#include "page.h"
#include "startup.h"

static void usage(FILE *f) {
    fprintf(f,
            "usage: ./report DIR ... [--out FILE] [--force]\n"
            "\n"
            "Writes one page, self-contained HTML that opens from file://, comparing the run folders\n"
            "(./train's) and grid folders (./ablate's) given: every run's validation bpb against step\n"
            "on one chart with a toggle per group, and a sortable table of the runs grouped by the\n"
            "options whose values differ between them (options that do not change what a run computes,\n"
            "such as threads and sampling, are left out). A grid's runs are named GRID/RUN. Each run and\n"
            "grid is linked to its own index.html, which is written where the folder has none (a\n"
            "folder's page stays as its command wrote it otherwise). What a folder lacks (a metrics\n"
            "line cut short, a run that failed or has not finished) is listed on the page.\n"
            "\n"
            "Charts need uPlot (`make uplot` fetches it into vendor/uplot/); without it the page has\n"
            "its tables and says how to get the charts.\n"
            "\n"
            "  DIR          a run folder (it has config.json) or a grid folder (results.csv, or run\n"
            "               folders in it); a folder that is neither is refused, naming why\n"
            "  --out FILE   where the page goes (default: report.html in the current folder): a new file\n"
            "               or a page; never one of a run's own files (config.json, model.safetensors,\n"
            "               metrics.jsonl, ...)\n"
            "  --force      replace FILE even when it is not a page\n");
}

int main(int argc, char **argv) {
    command_startup(argc, argv);
    command_one_process("report");
    const char *out = "report.html";
    bool force = false;
    const ArgFlag flags[] = {{"--out", .text = &out, .needs = "a file"}, {"--force", .on = &force}};
    const ArgSpec cli = {.command = "report", .usage = usage, .flags = flags,
                         .n_flags = (int)(sizeof flags / sizeof *flags)};
    ArgPositional pos;
    int status = args_parse(&cli, argc, argv, &pos);
    if (status != ARGS_OK) return status;
    if (pos.n == 0) {
        fprintf(stderr, "error: no run folder or grid given\nhint: ./report runs/NAME runs/ablate-phi\n");
        return 2;
    }
    Err e;
    if (output_page_check("--out", out, force, &e) != 0) {
        err_print(&e);
        return 1;
    }
    int rc = page_write_report(out, pos.v, pos.n, &e);
    if (interrupt_signal()) { /* the page is whole or not there: it is renamed into place */
        printf("interrupted: %s\n", rc == 0 ? "the page was written" : "no page written");
        return interrupt_exit_status();
    }
    if (rc != 0) {
        err_print(&e);
        return 1;
    }
    printf("wrote %s (%d folder%s)\n", out, pos.n, pos.n == 1 ? "" : "s");
    return 0;
}
