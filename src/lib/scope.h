/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * A delegated cgroup from the calling user's systemd manager: a transient scope with
 * Delegate=yes, asked for over D-Bus (libsystemd's sd-bus), as rootless container runtimes do
 * where nothing is delegated to them. See org.freedesktop.systemd1(5) (StartTransientUnit(),
 * JobRemoved()), systemd.scope(5), systemd.resource-control(5) (Delegate=) and systemd's
 * "Control Group APIs and Delegation" (https://systemd.io/CGROUP_DELEGATION/).
 */
#pragma once

#include <stddef.h>

/* How long the whole exchange may take (connect, call, job): the manager answers in well under
 * a second even on an emulated CPU; a bus that does not answer must not hang nsbox. */
#define SCOPE_TIMEOUT_USEC (5 * 1000 * 1000ULL)

/*
 * Ask the calling user's service manager (systemd --user) for a transient scope unit named
 * "nsbox-PID-RANDOM.scope" holding the calling process, with Delegate=yes (the user owns the
 * scope's cgroup and may make children and enable controllers in it), CollectMode=
 * inactive-or-failed (the unit is garbage-collected even if it fails) and a Description naming
 * nsbox. The manager is reached on the user bus: $DBUS_SESSION_BUS_ADDRESS, else
 * $XDG_RUNTIME_DIR/bus (sd_bus_open_user(3)).
 *
 * Blocks for at most SCOPE_TIMEOUT_USEC. On success the calling process has been moved by the
 * manager into the scope's cgroup (re-read /proc/self/cgroup); the scope goes away when its
 * last process exits. Only the calling process is moved (its threads with it, cgroup.procs
 * semantics); children started before stay where they are.
 *
 * unit[unit_size] receives the unit's name (also on failure, once chosen; else ""). reason[size]
 * receives a one-line explanation on failure.
 *
 * Returns 0 when the manager's start job finished with result "done"; else:
 *   -ENOMEDIUM, -ENOENT, -ECONNREFUSED, ... (sd_bus_open_user()'s -errno): no user bus to
 *       connect to ($XDG_RUNTIME_DIR unset, no socket, nobody listening);
 *   the -errno of a D-Bus error reply (sd_bus_error_get_errno(3)), e.g. -EHOSTUNREACH or
 *       -ENOENT when no service manager owns org.freedesktop.systemd1 on that bus, -EACCES
 *       when the manager refuses;
 *   -EIO: the job ended with a result other than "done" ("failed" when the manager could not
 *       move the process, typically because the cgroup nsbox is in and the manager's have no
 *       common ancestor the user may write to: cgroup-v2.rst, "Delegation Containment");
 *   -ETIMEDOUT: no answer or no end of the job within SCOPE_TIMEOUT_USEC;
 *   -ENOMEM.
 */
int scope_start_delegated(char *unit, size_t unit_size, char *reason, size_t size);

/*
 * Whether the calling user's service manager answers on the user bus, without asking it for
 * anything: connects as scope_start_delegated() does and asks the bus for the owner of
 * org.freedesktop.systemd1 (GetNameOwner(), which activates nothing). Blocks for at most
 * SCOPE_TIMEOUT_USEC. Returns 0, or a -errno as scope_start_delegated() (-ENOENT / the bus's
 * error when nobody owns the name) with a one-line reason in reason[size].
 */
int scope_manager_reachable(char *reason, size_t size);
