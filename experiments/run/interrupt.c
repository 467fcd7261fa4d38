#include "interrupt.h"

#include <signal.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static volatile sig_atomic_t received, heeded;
static volatile sig_atomic_t grace_ms = 800; /* under a second, with room for the exit on a busy machine */
static timer_t watchdog;
static int have_watchdog;

/* The watchdog: a command that has not looked at the signal by now is stuck
 * where it cannot (a library call, an allocation retried forever), so it
 * ends here with the same status. Only async-signal-safe calls. */
static void on_deadline(int sig) {
    (void)sig;
    if (heeded || !received) return;
    static const char line[] = "interrupted: stopped where it was, nothing more written\n";
    ssize_t w = write(STDOUT_FILENO, line, sizeof line - 1);
    (void)w;
    _exit(128 + received);
}

static void on_signal(int sig) {
    if (received) return;
    received = sig;
    long ms = grace_ms;
    struct itimerspec at = {.it_value = {ms / 1000, (ms % 1000) * 1000000L}};
    if (have_watchdog)
        timer_settime(watchdog, 0, &at, NULL);
    else
        alarm((unsigned)(ms / 1000 + 1));
}

void interrupt_install(void) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_deadline;
    sa.sa_flags = SA_RESTART;
    sigaction(SIGALRM, &sa, NULL);
    if (!have_watchdog) {
        struct sigevent ev = {.sigev_notify = SIGEV_SIGNAL, .sigev_signo = SIGALRM};
        have_watchdog = timer_create(CLOCK_MONOTONIC, &ev, &watchdog) == 0;
    }
    sa.sa_handler = on_signal;
    sa.sa_flags = SA_RESTART; /* a signal during a write must not fail the write */
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
}

int interrupt_signal(void) {
    if (received) heeded = 1;
    return received;
}

void interrupt_grace(double seconds) {
    if (!received) grace_ms = seconds > 0.8 ? (sig_atomic_t)(seconds * 1000) : 800;
}

int interrupt_exit_status(void) { return 128 + (received ? received : SIGINT); }
