#!/bin/sh
# scripts/ladder.sh: the compute ladder (EXPERIMENTS.md, "Across scale"): the disputed
# claims rerun at three budgets, s0 (the reproductions' model and budget), s1 (about 3x
# its training FLOPs) and s2 (about 8x), each grid resumable and packed as it finishes.
#
# usage: sh scripts/ladder.sh OUT CORPUS [PART...]
#   OUT     the folder the grids go to (OUT/ladder-<claim>-<rung>/); results/ keeps them
#   CORPUS  data/brown.txt
#   PART    what to run, in the order given (default: all of them, in the order below):
#           lr-s0 lr-s1 lr-s2    the learning-rate sweep of each rung's baseline
#           th-s0 th-s1 th-s2    talking heads against plain attention at 4 and 16 heads,
#                                with the initialisations for the spectrum claim
#           cos-s0 ...           cos re-weighting at context 512 (relu linear attention)
#           linformer-s0 ...     Linformer k = 64 and 128 against softmax at n = 512 (MLM)
#           models-s0 ...        the spectrum claim's trained models where th-sN ran on more
#                                than one machine (below); not in the default list
#           a claim's part may end in :LOOK, the seed pairs of the plan's look to run it
#           to (th-s0:6); without one, LOOK (default 3)
#           a th or linformer part's look may end in @POINTS, the points it trains
#           (below): th-s0:12@heads-16, linformer-s1:7@linformer_k; a point's seed
#           alone: linformer-s2:6@linformer_k,baseline_attn-softmax_seed-1340
#
# The binaries are the current folder's (./ablate, ./spectrum): run it from a checkout
# built at one fixed commit (git worktree), so that later commits cannot split a grid's
# pairs. ABLATE overrides the launcher (default: mpirun -np 2 ./ablate, one run per
# core, each on one thread; the ranks take a grid's runs in turn, so one may idle (asleep) at its
# end: ABLATE=./ablate in two scripts given different parts keeps both cores busy, with
# the same bits, each run being one thread either way). SYNC=DIR copies each grid's kept files (the archive and
# the tables) into DIR/<grid>/ once it is packed, so a session's finished grids can be
# committed as they finish. TABLES_ONLY=1 trains nothing and saves what has finished.
#
# To free the machine for a while, stop the script's session with TERM (each run saves a
# checkpoint) and start the same parts again later: a run's time_s then counts its
# training only. A SIGSTOP pause stops a run but not its clock, so it lands in time_s.
#
# The rungs (FLOPs per run: ./ablate --ladder's tables give them, 3 x the forward's
# multiply-adds x 2 per token, the score matrix counted whole; at context 128 and 512):
#   s0  2 layers, d_model 128, 2,500 steps  (0.43M parameters,  5.1M tokens at context 128)
#   s1  4 layers, d_model 128, 4,000 steps  (0.82M parameters,  8.2M tokens), 3.1x s0 at both
#   s2  4 layers, d_model 192, 5,500 steps  (1.82M parameters, 11.3M tokens), 9.2x s0 at 128,
#       8.3x at 512 (where the score matrix weighs more)
# grow both the model and the tokens (the papers' regime is both larger). Every run has 4
# heads (talking heads: 4 and 16), batch 16, one thread, and bf16 products (both arms
# alike; EXPERIMENTS.md §8 finds bf16 moves the demo model's bpb by less than 0.01).
#
# The learning rate of each rung comes from its sweep, not from s0: the softmax causal
# baseline at context 128, one seed, lr 0.0005, 0.001, 0.002, 0.004 (min_lr lr / 20, as
# the default's), extended by a factor of 2 beyond an end while the best is at that end
# (at most twice); the lowest final val bpb wins, and every claim's grid at that rung
# uses it. The seeds follow the plan fixed in SEED_PLAN below before any claim ran: a
# group-sequential plan with looks at 3, 6 and 12 seed pairs, each look's interval at
# 95/3 = 98.3% so that all three together keep 95% (./ablate --plan). This script runs
# the first look (3 pairs); a grid whose verdicts call for the next look is run again
# at that look: its part with the look after a colon (th-s0:6, then th-s0:12; more seeds
# than the look where pairs were set apart, th-s2:7), or LOOK=6 for every part given. A
# claim decided at a look stops there: its verdict stays the one
# at that look (the looks' levels split 95% three ways, so the plan holds whichever look a
# claim stops at), so a later look needs only the points of the claims still undecided.
# A th grid's four points answer three claims and feed a fourth (the spectrum reads the
# plain 4-head models): th-RUNG:LOOK@POINTS trains, for the look's seeds, only the points
# whose folder names begin with one of POINTS (comma-separated: heads-16 is both 16-head
# points, heads-4_talking_heads-none the plain 4-head one), each with ./train and the
# options ./ablate gives it (the same bits: ./ablate trains a run as ./train does), two at
# a time; the spectrum's models and initialisations only when POINTS has the plain 4-head
# point. linformer-RUNG:LOOK@POINTS likewise (linformer_k-64, linformer_k-128, baseline):
# once softmax's claims are decided, the k claim's later looks need the two k points
# alone. A point's seed may be named alone (baseline_attn-softmax_seed-1340): where a
# seed's pair would mix kernels, its missing run need not be trained. The grid's tables
# (TABLES_ONLY) count the runs there are: the points left out stay at the look they reached.
set -eu

OUT=${1:?usage: sh scripts/ladder.sh OUT CORPUS [PART...]}
CORPUS=${2:?usage: sh scripts/ladder.sh OUT CORPUS [PART...]}
shift 2
[ -x ./ablate ] && [ -x ./spectrum ] || { echo "error: ./ablate, ./spectrum: not built here" >&2; exit 1; }
[ -f "$CORPUS" ] || { echo "error: $CORPUS: no such corpus" >&2; exit 1; }

: "${ABLATE:=mpirun --allow-run-as-root -np 2 ./ablate}"
# TABLES_ONLY=1: train nothing; each grid's tables of the runs finished so far, packed and
# kept (a sitting that ends mid-grid: stop the script, then run the same parts so)
if [ -n "${TABLES_ONLY:-}" ]; then ABLATE="./ablate --tables-only"; fi
SEED_PLAN=3,6,12
LOOK=${LOOK:-3}
# the claims' tables follow the plan (an ./ablate from before --plan writes plain 95% ones,
# which ./ablate --tables-only or make ladder-tables rewrites)
PLAN=""
if ./ablate --help 2>&1 | grep -q -- '--plan'; then PLAN="--plan $SEED_PLAN"; fi

# (LADDER_RUNG_s0 and LADDER_COMMON replace s0's options and the common ones: for the tests)
RUNG_s0=${LADDER_RUNG_s0:-"--layers 2 --d_model 128 --steps 2500 --warmup 100"}
RUNG_s1="--layers 4 --d_model 128 --steps 4000 --warmup 160"
RUNG_s2="--layers 4 --d_model 192 --steps 5500 --warmup 220"
COMMON=${LADDER_COMMON:-"--heads 4 --batch 16 --threads 1 --sample_length 0 --precision bf16"}
LRS="0.0005:0.000025/0.001:0.00005/0.002:0.0001/0.004:0.0002"

rung_opts() { eval "echo \$RUNG_$1"; }
rung_steps() { rung_opts "$1" | sed 's/.*--steps \([0-9]*\).*/\1/'; }

# Packs grid $1 (a folder under OUT) and copies its kept files into SYNC.
keep() {
    sh scripts/results.sh pack "$OUT/$1"
    [ -n "${SYNC:-}" ] || return 0
    mkdir -p "$SYNC/$1"
    for f in runs.tar.xz results.md results.csv summary.csv curves.png; do
        [ ! -f "$OUT/$1/$f" ] || cp "$OUT/$1/$f" "$SYNC/$1/$f"
    done
    for d in "$OUT/$1"/*/spectrum-summary.csv; do
        [ -f "$d" ] || continue
        sub=$(basename "$(dirname "$d")")
        mkdir -p "$SYNC/$1/$sub"
        cp "$OUT/$1/$sub"/spectrum-summary.* "$SYNC/$1/$sub/"
    done
}

# Grid $1's archived runs back as run folders before ./ablate runs in it: ./ablate skips a
# finished run by its folder, and a grid packed mid-way (TABLES_ONLY, or a new machine) keeps
# its records only in the archive, so without this it would train them again.
restore() {
    [ ! -f "$OUT/$1/runs.tar.xz" ] || sh scripts/results.sh unpack "$OUT/$1" >/dev/null
}

# Whether run folder $1 is at its last step ($STEPS): recorded by a grid, or ./train's last
# line there.
at_end() { [ -f "$1/result.json" ] || tail -n 1 "$1/metrics.jsonl" 2>/dev/null | grep -q "^{\"step\": $STEPS,"; }

# Run folder $1 trained with ./train and the options after it, in the background, resumed
# from its checkpoint where it has one, unless it is at its last step; two at a time
# (train_wait waits for the last of them). Its output goes to $1.log, removed at its end.
JOBS=0
train_bg() {
    d=$1
    shift
    ! at_end "$d" || { rm -f "$d.log"; return 0; }
    if [ -f "$d/model.safetensors" ]; then
        ./train --resume "$d" >"$d.log" 2>&1 &
    else
        ./train "$@" --out "$d" "$CORPUS" >"$d.log" 2>&1 &
    fi
    JOBS=$((JOBS + 1))
    if [ "$JOBS" -ge 2 ]; then train_wait; fi
}
train_wait() { wait; JOBS=0; }

# The rung's learning rate as lr:min_lr, from its sweep (the lowest final val bpb of
# a finished run); nothing when the sweep has not finished.
rung_lr() {
    csv="$OUT/ladder-lr-$1/results.csv"
    [ -f "$csv" ] || return 0
    awk -F, 'NR == 1 { for (i = 1; i <= NF; i++) col[$i] = i; next }
        $(col["status"]) == "done" && $(col["final_val_bpb"]) != "" &&
        (best == "" || $(col["final_val_bpb"]) + 0 < best + 0) { best = $(col["final_val_bpb"]); lr = $(col["lr:min_lr"]) }
        END { if (lr != "") print lr }' "$csv"
}

lr_opts() {
    lr=$(rung_lr "$1")
    [ -n "$lr" ] || { echo "error: ladder-lr-$1: the sweep has not finished; run lr-$1 first" >&2; exit 1; }
    echo "--lr ${lr%%:*} --min_lr ${lr##*:}"
}

# lr:min_lr times x, as the axis writes it (%g).
scale_lr() { echo "$1" | awk -F: -v x="$2" '{ printf "%g:%g\n", $1 * x, $2 * x }'; }

# The sweep; while the best value is at an end of it, one more value beyond that end
# (twice or half the last, at most twice), so that the value chosen is a minimum.
sweep() {
    g=ladder-lr-$1
    lrs=$LRS
    restore "$g"
    for extend in 0 1 2; do
        # shellcheck disable=SC2086
        $ABLATE lr:min_lr=$lrs --no-baseline $(rung_opts "$1") $COMMON --context 128 --out "$OUT/$g" "$CORPUS"
        best=$(rung_lr "$1")
        [ "$extend" -lt 2 ] || break
        if [ "$best" = "$(scale_lr "${lrs##*/}" 1)" ]; then
            lrs="$lrs/$(scale_lr "$best" 2)"
        elif [ "$best" = "$(scale_lr "${lrs%%/*}" 1)" ]; then
            lrs="$(scale_lr "$best" 0.5)/$lrs"
        else
            break
        fi
        echo "ladder: $g: the best lr ($best) is at an end of the sweep; adding ${lrs##*/} or ${lrs%%/*}"
    done
    keep "$g"
}

# Whether run folder or point $1 (linformer_k-64_seed-1340, linformer_k-64) is one of
# POINTS, each the start of a folder name (all are when POINTS is empty): a point is
# wanted when one of POINTS names it or one of its seeds.
wanted() {
    [ -n "$POINTS" ] || return 0
    for w in $(echo "$POINTS" | tr , ' '); do
        case "$1" in "$w"*) return 0 ;; esac
        case "$w" in "$1"_seed-*) return 0 ;; esac
    done
    return 1
}

# Run folder OUT/$g/$1_seed-$2 trained with ./train and the options after them, when
# point $1 is one of POINTS (then points_done checks them all).
point_bg() {
    p=$1 s=$2
    shift 2
    wanted "${p}_seed-$s" || return 0
    train_bg "$OUT/$g/${p}_seed-$s" "$@" --seed "$s"
}
points_done() {
    train_wait
    for d in "$OUT/$g"/*_seed-*; do
        [ -d "$d" ] || continue
        if at_end "$d"; then rm -f "$d.log"; else echo "ladder: $d: not trained to its end (see $d.log)" >&2; fi
    done
}

# For each of the look's seeds, function $1 trains that seed's points of grid $g (its
# arguments: the rung $2 and the seed), two at a time; then points_done.
seed_points() {
    mkdir -p "$OUT/$g"
    seed=1337
    while [ "$seed" -lt $((1337 + LOOK)) ]; do
        "$1" "$2" "$seed"
        seed=$((seed + 1))
    done
    points_done
}

# The th grid's points that POINTS names for seed $2, each with ./train and the options
# ./ablate gives it (a seed's points side by side). (talking_heads sets g, lr and STEPS)
th_seed() {
    for heads in 4 16; do
        for th in none both; do
            # shellcheck disable=SC2086
            point_bg "heads-${heads}_talking_heads-$th" "$2" --attn softmax $(rung_opts "$1") $COMMON $lr \
                --context 128 --heads $heads --talking_heads $th
        done
    done
}

# The Linformer grid's points that POINTS names (linformer_k-64, linformer_k-128,
# baseline_attn-softmax) for seed $2, as th_seed. (linformer sets g, lr and STEPS)
linformer_seed() {
    for k in 64 128; do
        # shellcheck disable=SC2086
        point_bg "linformer_k-$k" "$2" $LINFORMER $(rung_opts "$1") $COMMON $lr --linformer_k $k
    done
    # shellcheck disable=SC2086
    point_bg baseline_attn-softmax "$2" $LINFORMER $(rung_opts "$1") $COMMON $lr --attn softmax
}

# The spectrum of arm $1's trained models (run folders OUT/$1_seed-N), into OUT/$1-spectrum.
# (a run trained on another machine has no model here: its archive keeps no weights)
arm_spectrum() {
    models=""
    for d in "$OUT/$1"_seed-*; do
        if [ -f "$d/model.safetensors" ] && at_end "$d"; then
            models="$models $d"
        elif [ -d "$d" ]; then
            echo "ladder: $d: no trained model.safetensors here (trained on another machine?): left out of the spectrum" >&2
        fi
    done
    # shellcheck disable=SC2086
    [ -z "$models" ] || ./spectrum $models "$CORPUS" --samples 8 --threads 1 --out "$OUT/$1-spectrum"
}

talking_heads() {
    g=ladder-th-$1
    lr=$(lr_opts "$1")
    STEPS=$(rung_steps "$1")
    restore "$g"
    restore "ladder-init-$1"
    if [ -n "$POINTS" ] && [ -z "${TABLES_ONLY:-}" ]; then
        seed_points th_seed "$1"
    else
        # shellcheck disable=SC2086
        $ABLATE heads=4/16 talking_heads=none/both --no-baseline $(rung_opts "$1") $COMMON $lr --context 128 \
            --seeds "$LOOK" $PLAN --expect "talking_heads=both < talking_heads=none" \
            --expect "heads=4,talking_heads=none < heads=16,talking_heads=none" --out "$OUT/$g" "$CORPUS"
    fi
    # the spectrum claim: the plain 4-head models against their initialisations (the
    # same options and seeds at learning rate 0 for one step: AdamW moves no weight)
    i=ladder-init-$1
    if [ -n "${TABLES_ONLY:-}" ]; then
        keep "$g"
        # the initialisations belong to the plain 4-head point: a part without it leaves
        # them; they run after the grid: a sitting may end before any has
        wanted heads-4_talking_heads-none || return 0
        ls "$OUT/$i"/*/result.json >/dev/null 2>&1 || [ -f "$OUT/$i/runs.tar.xz" ] || return 0
    fi
    # (when saving, a part without the plain 4-head point has returned above)
    if wanted heads-4_talking_heads-none; then
        # shellcheck disable=SC2086
        $ABLATE heads=4/16 --no-baseline $(rung_opts "$1") $COMMON --context 128 --seeds "$LOOK" \
            --lr 0 --min_lr 0 --warmup 0 --steps 1 --out "$OUT/$i" "$CORPUS"
        [ -z "${TABLES_ONLY:-}" ] || { keep "$i"; return 0; }
        arm_spectrum "$g/heads-4_talking_heads-none"
        arm_spectrum "$i/heads-4"
    fi
    if [ -n "$POINTS" ]; then
        # ./train's runs have no result.json until ./ablate --tables-only records them
        echo "ladder: $g: trained; save it from main: TABLES_ONLY=1 sh scripts/ladder.sh OUT CORPUS th-$1:$LOOK@$POINTS"
        return 0
    fi
    keep "$g"
    keep "$i"
}

# The spectrum claim's trained arm when the th grid's plain 4-head models are not all on
# this machine (the archives keep records, not weights: a grid whose seeds ran on two
# machines has some models on each): ladder-models-RUNG holds the model of every seed of
# the look as heads-4_seed-N, the th grid's run folder copied where its model is here and
# trained again with ./train and the grid's options where not (two at a time, one thread
# each: the bits ./ablate would make on this machine; a stopped one resumes), then their
# spectrum. Saved from main with TABLES_ONLY=1 (models-RUNG): ./ablate heads=4/16
# --talking_heads none --tables-only records the ./train runs and writes the grid's tables
# (the 16-head point, never trained here, is listed as not trained), and the grid is packed.
# make ladder-tables reads a rung's trained arm from here when this grid exists.
models() {
    g=ladder-models-$1
    t=ladder-th-$1
    lr=$(lr_opts "$1")
    STEPS=$(rung_steps "$1")
    restore "$g"
    restore "$t"
    mkdir -p "$OUT/$g"
    seed=1337
    while [ "$seed" -lt $((1337 + LOOK)) ]; do
        d=$OUT/$g/heads-4_seed-$seed
        from=$OUT/$t/heads-4_talking_heads-none_seed-$seed
        seed=$((seed + 1))
        ! at_end "$d" || continue
        if [ -f "$from/model.safetensors" ] && [ -f "$from/result.json" ]; then
            rm -rf "$d"
            cp -a "$from" "$d"
            rm -f "$d/index.html"
            continue
        fi
        [ -z "${TABLES_ONLY:-}" ] || continue
        # shellcheck disable=SC2086
        train_bg "$d" --attn softmax --talking_heads none $(rung_opts "$1") $COMMON $lr --context 128 --seed $((seed - 1))
    done
    train_wait
    models=""
    seed=1337
    while [ "$seed" -lt $((1337 + LOOK)) ]; do
        d=$OUT/$g/heads-4_seed-$seed
        seed=$((seed + 1))
        if ! at_end "$d" || [ ! -f "$d/model.safetensors" ]; then
            echo "ladder: $d: not trained to its end (see $d.log)" >&2
            continue
        fi
        rm -f "$d.log"
        models="$models $d"
    done
    if [ -z "${TABLES_ONLY:-}" ]; then
        # shellcheck disable=SC2086
        [ -z "$models" ] || ./spectrum $models "$CORPUS" --samples 8 --threads 1 --out "$OUT/$g/heads-4-spectrum"
        echo "ladder: $g: trained; save it from main: TABLES_ONLY=1 sh scripts/ladder.sh OUT CORPUS models-$1:$LOOK"
        return 0
    fi
    # shellcheck disable=SC2086
    $ABLATE heads=4/16 --talking_heads none --no-baseline $(rung_opts "$1") $COMMON $lr --context 128 \
        --seeds "$LOOK" --out "$OUT/$g" "$CORPUS"
    keep "$g"
}

cos() {
    g=ladder-cos-$1
    lr=$(lr_opts "$1")
    restore "$g"
    # shellcheck disable=SC2086
    $ABLATE reweight=none/cos --attn linear --phi relu --no-baseline $(rung_opts "$1") $COMMON $lr \
        --context 512 --seeds "$LOOK" $PLAN --expect "reweight=cos < reweight=none" --out "$OUT/$g" "$CORPUS"
    keep "$g"
}

LINFORMER="--attn linformer --objective mlm --pos rope --context 512"
linformer() {
    g=ladder-linformer-$1
    lr=$(lr_opts "$1")
    STEPS=$(rung_steps "$1")
    restore "$g"
    if [ -n "$POINTS" ] && [ -z "${TABLES_ONLY:-}" ]; then
        seed_points linformer_seed "$1"
        # ./train's runs have no result.json until ./ablate --tables-only records them
        echo "ladder: $g: trained; save it from main: TABLES_ONLY=1 sh scripts/ladder.sh OUT CORPUS linformer-$1:$LOOK@$POINTS"
        return 0
    fi
    # shellcheck disable=SC2086
    $ABLATE linformer_k=64/128 $LINFORMER $(rung_opts "$1") $COMMON $lr \
        --seeds "$LOOK" $PLAN --expect "linformer_k=128 < linformer_k=64" \
        --expect "baseline < linformer_k=64" --expect "baseline < linformer_k=128" --out "$OUT/$g" "$CORPUS"
    keep "$g"
}

[ $# -gt 0 ] || set -- lr-s0 lr-s1 lr-s2 th-s0 cos-s0 linformer-s0 th-s1 cos-s1 linformer-s1 th-s2 cos-s2 \
    linformer-s2
DEFAULT_LOOK=$LOOK
for part in "$@"; do
    LOOK=$DEFAULT_LOOK
    POINTS=""
    case "$part" in
    th-*:*@?* | linformer-*:*@?*) POINTS=${part##*@}; part=${part%@*} ;;
    *@*) echo "error: $part: only a th or linformer part's look takes @POINTS (th-s0:12@heads-16)" >&2; exit 2 ;;
    esac
    case "$part" in
    lr-*:*) echo "error: $part: a sweep has one seed, no looks" >&2; exit 2 ;;
    *:3 | *:6 | *:12) LOOK=${part##*:}; part=${part%:*} ;;
    # more seeds than a look's pairs, where a grid's pairs were set apart (mixed kernels):
    # th-s2:7 gives the second look's 6 pairs with seed 1338's pair left out
    *:[4-9] | *:1[0-9]) LOOK=${part##*:}; part=${part%:*}
        echo "ladder: $part: $LOOK seeds, not a look of the plan ($SEED_PLAN): for pairs set apart" ;;
    *:*) echo "error: $part: the plan's looks are $SEED_PLAN (or 4 to 19 seeds where pairs were set apart)" >&2
        exit 2 ;;
    esac
    rung=${part##*-}
    case "$rung" in s0 | s1 | s2) ;; *) echo "error: $part: no such part" >&2; exit 2 ;; esac
    echo "ladder: $part, $LOOK seed pairs${POINTS:+, points $POINTS} ($(date -u +%H:%M))"
    case "$part" in
    lr-*) sweep "$rung" ;;
    th-*) talking_heads "$rung" ;;
    models-*) models "$rung" ;;
    cos-*) cos "$rung" ;;
    linformer-*) linformer "$rung" ;;
    *) echo "error: $part: no such part" >&2; exit 2 ;;
    esac
done
