/* deal.c: see deal.h. */
#include "deal.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "dist.h"
#include "run.h"

#define CLAIMS_PREFIX ".deal-"

/* Removes folder path and the claim files in it (no subfolders). */
static void remove_claims(const char *path) {
    DIR *d = opendir(path);
    if (!d) return;
    struct dirent *ent;
    while ((ent = readdir(d))) {
        char file[1400];
        if (ent->d_name[0] == '.') continue;
        if (path_join(file, sizeof file, path, ent->d_name, NULL) == 0) unlink(file);
    }
    closedir(d);
    rmdir(path);
}

/* Rank 0: the claim folders an earlier command left (stopped by kill -9). */
static void remove_stale(const char *dir) {
    DIR *d = opendir(dir);
    if (!d) return;
    struct dirent *ent;
    while ((ent = readdir(d))) {
        char path[1400];
        if (strncmp(ent->d_name, CLAIMS_PREFIX, strlen(CLAIMS_PREFIX)) ||
            path_join(path, sizeof path, dir, ent->d_name, NULL) != 0 || !is_directory(path))
            continue;
        remove_claims(path);
    }
    closedir(d);
}

int deal_open(Deal *d, const char *dir, Err *e) {
    memset(d, 0, sizeof *d);
    if (dist_size() == 1) return 0;
    int rc = 0;
    char name[64];
    if (dist_rank() == 0) {
        remove_stale(dir);
        snprintf(name, sizeof name, CLAIMS_PREFIX "%ld-%ld", (long)getpid(), (long)time(NULL));
        if ((rc = path_join(d->claims, sizeof d->claims, dir, name, e)) == 0 && mkdir(d->claims, 0755) != 0)
            rc = err_set(e, "%s: cannot make the claim folder: %s", d->claims, strerror(errno));
    }
    if (dist_agree(rc, e) != 0) return -1;
    /* shared when every rank finds rank 0's new folder in its own dir */
    dist_bcast(name, sizeof name, 0);
    double unseen = path_join(d->claims, sizeof d->claims, dir, name, NULL) != 0 || !is_directory(d->claims);
    dist_sum(&unseen, 1);
    d->shared = unseen == 0;
    if (!d->shared && dist_rank() == 0) remove_claims(d->claims);
    if (!d->shared) d->claims[0] = '\0';
    return 0;
}

int deal_turn(int index) { return index % dist_size(); }

bool deal_take(Deal *d, int index) {
    if (!d->shared) return deal_turn(index) == dist_rank();
    char path[1200];
    snprintf(path, sizeof path, "%s/%d", d->claims, index);
    int fd = open(path, O_WRONLY | O_CREAT | O_EXCL, 0644);
    if (fd >= 0) return close(fd), true;
    if (errno == EEXIST) return false; /* another rank's */
    /* the folder went away or filled up: by turn from here on (a run two
     * ranks then both take is refused to the second by its folder's lock) */
    printf("rank %d: %s: cannot claim a run (%s): the runs left are dealt by turn\n", dist_rank(), path,
           strerror(errno));
    d->shared = false;
    return deal_turn(index) == dist_rank();
}

void deal_close(Deal *d) {
    if (d->claims[0] && dist_rank() == 0) remove_claims(d->claims);
    d->claims[0] = '\0';
}
