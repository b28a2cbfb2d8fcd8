/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* What the result says of the proxy's connections (struct nsbox_network_report): each
 * connection recorded in order of arrival (refused ones take at most half of the list), and
 * every allowed byte in a host's entry. */
#include <stdio.h>
#include <string.h>

#include "proxy-internal.h"

void conn_record(struct proxy *p, struct conn *c, const char *host, uint16_t port, bool allowed,
                 const char *reason)
{
    struct nsbox_network_report *r = &p->report;

    if (c && c->record != SIZE_MAX) {
        /* Recorded already (counted then): a later word on it. */
        struct nsbox_network_connection *e = &r->connections[c->record];
        if (e->allowed && !allowed)
            r->connections_refused++;
        if (!allowed)
            c->rule = NULL;
        e->allowed = allowed;
        (void)snprintf(e->reason, sizeof(e->reason), "%s", reason);
        return;
    }
    r->connections_total++;
    if (!allowed)
        r->connections_refused++;
    if (r->n_connections == NSBOX_NETWORK_MAX ||
        (!allowed && p->refused_listed >= NSBOX_NETWORK_MAX / 2)) {
        r->connections_omitted++;
        return;
    }
    struct nsbox_network_connection *e = &r->connections[r->n_connections];
    *e = (struct nsbox_network_connection){.port = port, .allowed = allowed};
    (void)snprintf(e->host, sizeof(e->host), "%s", host);
    (void)snprintf(e->reason, sizeof(e->reason), "%s", reason);
    if (c)
        c->record = r->n_connections;
    r->n_connections++;
    p->refused_listed += !allowed;
}

static struct nsbox_network_host *host_entry(struct nsbox_network_report *r, const char *host,
                                             uint16_t port)
{
    for (size_t i = 0; i < r->n_hosts; i++)
        if (r->hosts[i].port == port && strcmp(r->hosts[i].host, host) == 0)
            return &r->hosts[i];
    return NULL;
}

/* The entry of report.hosts that an allowed connection's bytes go to (see struct
 * nsbox_network_host), chosen once: when the connection reaches its host, so that the entries
 * are in order of arrival whatever order connections end in (the ends of sequential
 * connections race each other), or at its end if it never did. */
size_t host_slot(struct proxy *p, struct conn *c)
{
    struct nsbox_network_report *r = &p->report;
    struct nsbox_network_host *e;
    char key[sizeof(r->hosts[0].host)];
    uint16_t port = c->head.port;

    if (c->host != SIZE_MAX)
        return c->host;
    (void)snprintf(key, sizeof(key), "%s", c->head.host);
    if (c->rule->wildcard && !host_entry(r, key, port) &&
        NSBOX_NETWORK_HOSTS_MAX - r->n_hosts <= NSBOX_NETWORK_HOSTS_WILDCARD)
        (void)snprintf(key, sizeof(key), "*.%.250s", c->rule->host);
    e = host_entry(r, key, port);
    if (!e && r->n_hosts + 1 < NSBOX_NETWORK_HOSTS_MAX) {
        e = &r->hosts[r->n_hosts++];
        (void)snprintf(e->host, sizeof(e->host), "%s", key);
        e->port = port;
    }
    if (!e && !(e = host_entry(r, "", 0))) /* the last entry: the others */
        e = &r->hosts[r->n_hosts++];
    c->host = (size_t)(e - r->hosts);
    return c->host;
}

/* Add an allowed connection's bytes to the totals of its host and port: every allowed byte is
 * in an entry. */
void host_account(struct proxy *p, struct conn *c)
{
    struct nsbox_network_host *e = &p->report.hosts[host_slot(p, c)];

    e->connections++;
    e->bytes_sent += c->bytes_up;
    e->bytes_received += c->bytes_down;
}

/* A refusal or cut after the record was made: say why, once. */
void conn_note(struct proxy *p, struct conn *c, const char *reason)
{
    if (c->record != SIZE_MAX && !p->report.connections[c->record].reason[0])
        (void)snprintf(p->report.connections[c->record].reason,
                       sizeof(p->report.connections[c->record].reason), "%s", reason);
}

/* A connection its rule allowed, refused once its name was looked up: the record (made
 * allowed) becomes refused, with reason unless it has one. */
void refuse_after_lookup(struct proxy *p, struct conn *c, const char *reason)
{
    conn_note(p, c, reason);
    c->rule = NULL;
    if (c->record != SIZE_MAX)
        p->report.connections[c->record].allowed = false;
    p->report.connections_refused++;
}
