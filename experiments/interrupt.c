#include "interrupt.h"

#include <signal.h>
#include <string.h>

static volatile sig_atomic_t received;

static void on_signal(int sig) { received = sig; }

void interrupt_install(void) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sa.sa_flags = SA_RESTART; /* a signal during a write must not fail the write */
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
}

int interrupt_signal(void) { return received; }

int interrupt_exit_status(void) { return 128 + (received ? received : SIGINT); }
