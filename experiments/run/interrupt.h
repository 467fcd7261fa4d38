/* room run/: the commands' run machinery; includes the engine (core, layers, optim, data) and run/. */
/* interrupt.h: Ctrl-C and SIGTERM in the commands.
 *
 * The handler only records the signal. Every long phase polls
 * interrupt_signal() and stops where it is safe: training saves a checkpoint,
 * evaluation and sampling stop with it, ./spectrum and ./extrapolate stop
 * before writing anything. The command then exits 128 + the signal, the
 * shell's convention: 130 for Ctrl-C, 143 for SIGTERM.
 *
 * A command that does not poll within the grace (0.8 s unless a longer one
 * is set: training sets twice its step time) is stuck where it cannot, in a
 * library call say: a watchdog then ends it with the same status and an
 * "interrupted" line, so a signal always ends a command. */
#ifndef ATTNLAB_INTERRUPT_H
#define ATTNLAB_INTERRUPT_H

/* Installs the handler for SIGINT and SIGTERM. */
void interrupt_install(void);
/* The signal received (SIGINT or SIGTERM), or 0. A call after the signal
 * stops the watchdog: the caller is stopping. */
int interrupt_signal(void);
/* How long after a signal the watchdog waits for a poll (at least 0.8 s). */
void interrupt_grace(double seconds);
/* 128 + that signal (130 when none was received). */
int interrupt_exit_status(void);

#endif
