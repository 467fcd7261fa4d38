/* bench.c: ./bench, speed measurements: the command line, and which one runs.
 *
 * By default: training throughput on the reference configuration (4 layers,
 * d 256, 4 heads, T 256, B 16, tied embeddings, AdamW: the option table's
 * defaults with d_model and context at 256), the median over timed steps after
 * warm-up, with a per-op breakdown (bench_train.c). --vs-torch runs
 * experiments/bench/torch_reference.py, the same model in PyTorch, in the same
 * invocation: two short probes of each plausible thread and OpenMP setting, then
 * --rounds rounds of both under PyTorch's fastest, and prints the median of
 * the rounds' ratios (bench_torch.c).
 *
 * --ops: each op's time, matmul against raw cblas_sgemm (bench_ops.c).
 *
 * --attn X (and any model option) changes the training configuration; attn=
 * linformer has no causal form, so it benchmarks objective=mlm unless
 * --objective is given.
 *
 * --scaling: how one attention layer's time and memory grow with the length,
 * with --vs-torch against the same layer in PyTorch (bench_scaling.c).
 *
 * --mpi: data-parallel throughput at 1 and 2 ranks, and the allreduce's share
 * of a step (bench_mpi.c). */
#include <cblas.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "precision.h"
#include "args.h"
#include "bench.h"
#include "dist.h"
#include "interrupt.h"
#include "model.h"
#include "ops.h"
#include "options.h"
#include "startup.h"
#include "util.h"

static void usage(FILE *f) {
    fprintf(f,
            "usage: ./bench [--ops] [--threads N] [--steps N] [--reps N] [--key value ...]\n"
            "       ./bench --vs-torch [--rounds N] [--threads N] [--steps N] [--key value ...]\n"
            "       ./bench --scaling [--attn X] [--vs-torch] [--lengths 512,1024,...] [--rounds N] [--threads N]\n"
            "                 [--reps N]\n"
            "       ./bench --mpi [--steps N] [--threads N] [--key value ...]\n"
            "\n"
            "  (default)    training throughput on the reference configuration (4 layers,\n"
            "               d_model 256, 4 heads, context 256, batch 16; model and batch\n"
            "               options may be changed with --key value), with a per-op breakdown\n"
            "  --vs-torch   also run experiments/bench/torch_reference.py, the same model in PyTorch, at its\n"
            "               fastest setting here: two short probes (1 warm-up + 5 steps) of 1 thread and\n"
            "               of --threads threads with OpenMP's wait variables unset, OMP_WAIT_POLICY\n"
            "               PASSIVE or ACTIVE, or as attnlab runs (GOMP_SPINCOUNT=1000), then of the\n"
            "               fastest with ATEN_CPU_CAPABILITY=avx512 on an AVX-512 CPU. Then --rounds\n"
            "               rounds of attnlab and PyTorch in turn: each round's pair and ratio, the\n"
            "               medians, and the OpenBLAS library and kernel of each. PyTorch inherits\n"
            "               OPENBLAS_CORETYPE, and LD_LIBRARY_PATH makes its libblas.so.3 attnlab's\n"
            "               OpenBLAS where that library's folder has one. With --scaling,\n"
            "               experiments/bench/torch_scaling.py, the causal linear-time layer (below) in\n"
            "               PyTorch, at the same lengths\n"
            "  --gemm       the reference step's matrix products, each alone, through OpenBLAS's\n"
            "               sgemm, oneDNN's fp32 matmul and oneDNN's bf16 matmul (GFLOP/s)\n"
            "  --ops        time each op: the matmul products of a training step against raw\n"
            "               cblas_sgemm on the same shapes, then the other ops\n"
            "  --scaling    one attention layer (projections and kernel, d_model 256, 4 heads, B 1),\n"
            "               forward + backward, at each length: time per step and per token, arena\n"
            "               peak and RSS peak; then the kernel alone. The default kernel and the\n"
            "               causal linear-time one (below), or the --attn kernel (one without a causal\n"
            "               form runs bidirectionally). Writes\n"
            "               bench-scaling.csv, bench-scaling.png and bench-scaling-memory.png in the\n"
            "               current folder. Default 2 threads. Skips a length whose memory would\n"
            "               pass 8 GiB (a kernel with a score matrix keeps T x T per head)\n"
            "  --mpi        data-parallel scaling: runs mpirun -np 1, then -np 2, of ./bench --mpi (1 thread\n"
            "               per rank unless --threads), each rank training the configuration above on\n"
            "               its own batch; prints tok/s over all ranks, the scaling efficiency tok/s(N) /\n"
            "               (N tok/s(1)) and the gradient allreduce's time, in the step and alone. Under\n"
            "               mpirun (mpirun -np 8 ./bench --mpi), measures that rank count\n"
            "  --lengths L  --scaling's lengths, comma-separated (default 512,1024,...,16384)\n"
            "  --rounds N   --scaling sweeps the lengths N times (default 3) and reports each row's\n"
            "               median over the sweeps, so that a burst of other load spoils no one row;\n"
            "               --vs-torch runs N paired rounds (default 3) and reports the medians\n"
            "  --threads N  threads for OpenMP and OpenBLAS (default: all cores)\n"
            "  --steps N    timed training steps, after 3 warm-up steps (default 10)\n"
            "  --reps N     timed runs per --ops figure (default 21) or --scaling row (default: 5,\n"
            "               or about 1 s of runs when they are short, up to 100; 3 past 1 s a run);\n"
            "               each figure is their median\n"
            "  --attn X     the kernel to measure (below); with its model options. A kernel with no\n"
            "               causal form runs with objective mlm unless --objective is given\n");
    fprintf(f, "\nattn values:");
    for (int i = 0; i < attn_choice_count(); i++) fprintf(f, "%s %s", i ? "," : "", attn_choice(i)->name);
    fprintf(f, "\n--scaling's pair: %s and %s (causal, linear in time and memory)\n", option_find("attn")->def,
            attn_scaling_reference);
}


/* "512,1024,2048" into o->lengths. */
static int parse_lengths(const char *flag, const char *v, void *ctx) {
    BenchOptions *o = ctx;
    o->n_lengths = 0;
    const char *p = v;
    while (p && *p && o->n_lengths < BENCH_MAX_LENGTHS) {
        char *end;
        long x = strtol(p, &end, 10);
        if (end == p || x < 1 || x > 1 << 20) break;
        o->lengths[o->n_lengths++] = (int)x;
        if (*end == '\0') return 0;
        if (*end != ',' || end[1] == '\0') break;
        p = end + 1;
    }
    fprintf(stderr, "error: %s: expected up to 32 comma-separated lengths in [1, 1048576], got '%s'\n", flag, v ? v : "");
    return -1;
}

/* What the option table's options set. */
typedef struct {
    BenchOptions *o;
    Config *cfg;
    bool objective_given;
} BenchArgs;

/* The option table's model options, and --batch. */
static bool takes_option(const OptDef *opt) {
    return opt->group == GROUP_MODEL || !strcmp(opt->name, "batch") || !strcmp(opt->name, "precision");
}

static int set_option(const OptDef *opt, const char *value, void *ctx) {
    BenchArgs *b = ctx;
    Err e;
    if (option_give(b->cfg, opt->name, value, &e) != 0) {
        err_print(&e);
        return -1;
    }
    if (!strcmp(opt->name, "attn")) b->o->attn_given = true;
    if (!strcmp(opt->name, "objective")) b->objective_given = true;
    return 0;
}

static int bench_main(int argc, char **argv) {
    BenchOptions o = {.reps = 21, .threads = 0, .steps = 10};
    /* The reference configuration: the defaults, at d_model 256 and T 256. */
    Config cfg;
    config_defaults(&cfg);
    cfg.model.d_model = 256;
    cfg.model.context = 256;
    BenchArgs b = {&o, &cfg, false};
    const ArgFlag flags[] = {
        {"--ops", .on = &o.ops},
        {"--gemm", .on = &o.gemm},
        {"--vs-torch", .on = &o.vs_torch},
        {"--scaling", .on = &o.scaling},
        {"--threads", .integer = &o.threads, .lo = 1, .hi = 1024, .repeat = true, .given = &o.threads_given},
        {"--mpi", .on = &o.mpi},
        {"--steps", .integer = &o.steps, .lo = 1, .hi = 100000, .repeat = true},
        {"--reps", .integer = &o.reps, .lo = 1, .hi = 100000, .given = &o.reps_given},
        {"--rounds", .integer = &o.rounds, .lo = 1, .hi = 100},
        {"--lengths", .call = parse_lengths, .ctx = &o},
    };
    const ArgSpec cli = {.command = "bench", .usage = usage, .flags = flags,
                         .n_flags = (int)(sizeof flags / sizeof *flags), .option = set_option,
                         .takes = takes_option, .ctx = &b};
    ArgPositional pos;
    int status = args_parse(&cli, argc, argv, &pos);
    if (status != ARGS_OK) return status;
    if (pos.n) {
        fprintf(stderr, "error: unknown option '%s'\nhint: ./bench --help lists the options\n", pos.v[0]);
        return 2;
    }
    Err e;
    if (attn_kernel_for(cfg.model.attn)->bidirectional_only && !b.objective_given) {
        cfg.model.objective = OBJECTIVE_MLM;
        printf("attn=%s has no causal form: measuring objective=mlm (bidirectional)\n", attn_choice(cfg.model.attn)->name);
    }
    if (config_validate(&cfg, &e) != 0) {
        err_print(&e);
        return 2;
    }
    if (dist_size() > 1 && !o.mpi) {
        /* every rank would time its own step at once, and rank 0 print figures the
         * others slowed; --mpi's ranks are the ones ./bench --mpi starts */
        fprintf(stderr,
                "error: ./bench under mpirun -np %d: each rank would time the same step at once\n"
                "hint: ./bench --mpi measures ranks (it starts mpirun itself); the other modes run without mpirun\n",
                dist_size());
        return dist_refused();
    }
    if (o.mpi && (o.ops || o.scaling || o.vs_torch)) {
        fprintf(stderr, "error: --mpi: runs on its own, not with --ops, --scaling or --vs-torch\n");
        return 2;
    }
    if (o.scaling && o.ops) {
        fprintf(stderr, "error: --scaling: runs on its own, not with --ops\n");
        return 2;
    }
    if (o.scaling && o.vs_torch && o.attn_given && cfg.model.attn != attn_find(attn_scaling_reference)) {
        fprintf(stderr, "error: --scaling --vs-torch: compares the causal %s layer only\n"
                        "hint: drop --attn, or use --attn %s\n", attn_scaling_reference, attn_scaling_reference);
        return 2;
    }
    if (o.scaling && o.vs_torch &&
        (cfg.model.objective != OBJECTIVE_CLM || model_key_size(&cfg.model) != cfg.model.d_model / cfg.model.heads ||
         model_head_size(&cfg.model) != cfg.model.d_model / cfg.model.heads)) {
        fprintf(stderr, "error: --scaling --vs-torch: the PyTorch layer is causal, with key_size = head_size = "
                        "d_model / heads\n");
        return 2;
    }
    if (!o.n_lengths)
        for (int T = 512; T <= 16384; T *= 2) o.lengths[o.n_lengths++] = T;
    /* --scaling defaults to 2 threads, not all cores, so that its figures are
     * those docs/speed.md reports, taken on a 2-core machine, on any host */
    if (o.scaling && !o.threads) o.threads = 2;
    if (o.rounds && !o.scaling && !o.vs_torch) {
        fprintf(stderr, "error: --rounds: only with --scaling or --vs-torch\n");
        return 2;
    }
    if (!o.rounds) o.rounds = 3;
    if (cfg.train.precision == PRECISION_BF16 && gemm_bf16_check(&e) != 0) {
        err_print(&e);
        return 2;
    }
    /* capped at the CPUs this process may use, as every command does (startup.h) */
    int threads = command_threads(o.threads || dist_size() == 1 ? o.threads : dist_default_threads(), stdout, &e);
    if (threads < 0) {
        err_print(&e);
        return 1;
    }
    printf("attnlab bench: %s\n(%s)\nprecision %s; oneDNN ISA %s; bf16 products here: %s\n\n", threads_banner(threads),
           openblas_get_config(), precision_choices[cfg.train.precision], gemm_dnnl_isa(), gemm_bf16_route());
    /* every product of every mode at the precision asked (the training step also binds its weights) */
    if (cfg.train.precision == PRECISION_BF16) gemm_set_precision(PRECISION_BF16);
    int rc = 0;
    if (o.mpi)
        rc = bench_mpi(&o, &cfg, argc, argv);
    else if (o.scaling)
        rc = bench_scaling(&o, &cfg, threads);
    else if (o.ops)
        bench_ops(&o);
    else if (o.vs_torch)
        rc = bench_vs_torch(&o, &cfg, threads);
    else if (o.gemm)
        rc = bench_gemm(&cfg);
    else
        bench_train(&o, &cfg);
    /* a signal in the last phase, which ended before the watchdog: the figures are not whole */
    if (interrupt_signal()) {
        printf("interrupted: the figures above are not complete\n");
        return interrupt_exit_status();
    }
    return rc;
}

int main(int argc, char **argv) { return command_main_distributed(argc, argv, bench_main); }
