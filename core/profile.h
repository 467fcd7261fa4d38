/* profile.h: time per op, for ./bench. While profiling is on, every forward
 * and every backward the tape runs is timed and added to its op's entry. */
#ifndef ATTNLAB_PROFILE_H
#define ATTNLAB_PROFILE_H

typedef struct {
    const char *name;
    double forward_s, backward_s;
    long calls;
} OpProfile;

void profile_start(void); /* zeroes the entries and turns profiling on */
void profile_stop(void);
/* Copies up to max entries, slowest (forward + backward) first; returns how many. */
int profile_read(OpProfile *out, int max);

#endif
