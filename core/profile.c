/* profile.c: the op profiler, a watcher of the tape (tape_watch). */
#include "profile.h"

#include <stdlib.h>
#include <string.h>

#include "tape.h"
#include "util.h"

#define PROFILE_MAX 64
static OpProfile profile[PROFILE_MAX];
static const OpDef *profile_def[PROFILE_MAX];
static int n_profile;

static OpProfile *profile_entry(const OpDef *def) {
    for (int i = 0; i < n_profile; i++)
        if (profile_def[i] == def) return &profile[i];
    if (n_profile == PROFILE_MAX) DIE("profile: more than %d ops", PROFILE_MAX);
    profile_def[n_profile] = def;
    profile[n_profile] = (OpProfile){.name = def->name};
    return &profile[n_profile++];
}

static void profile_add(const OpDef *def, bool backward, double seconds) {
    OpProfile *p = profile_entry(def);
    if (backward) {
        p->backward_s += seconds;
    } else {
        p->forward_s += seconds;
        p->calls++;
    }
}

void profile_start(void) {
    n_profile = 0;
    tape_watch(profile_add);
}

void profile_stop(void) { tape_watch(NULL); }

static int by_total_time(const void *a, const void *b) {
    const OpProfile *x = a, *y = b;
    double tx = x->forward_s + x->backward_s, ty = y->forward_s + y->backward_s;
    return (tx < ty) - (tx > ty);
}

int profile_read(OpProfile *out, int max) {
    int n = n_profile < max ? n_profile : max;
    OpProfile all[PROFILE_MAX];
    memcpy(all, profile, (size_t)n_profile * sizeof *all);
    qsort(all, (size_t)n_profile, sizeof *all, by_total_time);
    memcpy(out, all, (size_t)n * sizeof *out);
    return n;
}
