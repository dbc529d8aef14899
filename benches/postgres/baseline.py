#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""PostgreSQL baseline of the benchmarks (not run in CI; started by run.sh).

Mirrors the reference design (Go projector + PostgreSQL + Go GraphQL server):

  P1  load a genworld world into the reference schema (schema.sql) the way the reference projector
      writes: one upsert per object (INSERT ... ON CONFLICT ... DO UPDATE ... RETURNING id), FK
      lookups through an edge cache / negative cache / DB like its IDResolver, and the reference's
      follow-up statements (member sync, target clear, back-link, approval FK fix), each statement
      auto-committed except the Team transaction (as the Go projector does).
  P2  console queries as the SQL entgql/ent would send for the GraphQL operation (one statement per
      connection level, team isolation by the interceptor's IN-subqueries), warm, N times, client-side
      latency over loopback TCP (p50/p99).
  P4  pg_database_size vs. raw manifest bytes; time from `pg_ctl start` to the first successful
      query on the loaded cluster; first (cold) Q1 after the restart.

Writes one JSON result file with every number, the parameters, PostgreSQL version and the SQL text.
"""

import argparse
import datetime as dt
import json
import os
import platform
import statistics
import subprocess
import sys
import threading
import time

import psycopg
from psycopg.types.json import Jsonb

KIND_ORDER = ['Zone', 'Group', 'Team', 'Application', 'Api', 'ApiExposure', 'ApiSubscription', 'EventType',
              'EventExposure', 'EventSubscription', 'PermissionSet', 'FileExposure', 'FileSubscription', 'McpServer',
              'AgentCard', 'AgenticExposure', 'AgenticSubscription', 'Approval', 'ApprovalRequest']
# kinds without a table in the reference schema (schema.sql): counted, not written
NO_TABLE = {'FileExposure', 'FileSubscription', 'McpServer', 'AgentCard', 'AgenticExposure', 'AgenticSubscription'}

ENV_LABEL = 'cp.ei.telekom.de/environment'
APP_LABEL = 'cp.ei.telekom.de/application'
NEG_TTL = 5.0  # IDR_NEG_TTL default


def now():
    return dt.datetime.now(dt.timezone.utc)


def parse_time(s):
    if not s:
        return None
    return dt.datetime.fromisoformat(s.replace('Z', '+00:00'))


def status_of(obj):
    for c in (obj.get('status') or {}).get('conditions') or []:
        if c.get('type') == 'Ready':
            st, msg = c.get('status'), c.get('message') or ''
            if st == 'True':
                return 'READY', msg
            if st == 'False':
                return ('ERROR' if c.get('reason') in ('Error', 'Failed') else 'PENDING'), msg
            return 'UNKNOWN', msg
    return 'UNKNOWN', ''


def env_of(obj):
    return ((obj.get('metadata') or {}).get('labels') or {}).get(ENV_LABEL, '')


def label(obj, key):
    return ((obj.get('metadata') or {}).get('labels') or {}).get(key, '')


def team_from_ns(ns):
    i = ns.find('--')
    return ns[i + 2:] if i >= 0 else ns


def map_strategy(s):
    return {'Auto': 'AUTO', 'Simple': 'SIMPLE', 'FourEyes': 'FOUR_EYES'}.get(s, (s or '').upper())


def drop_empty(d):
    return {k: v for k, v in d.items() if v not in (None, '', [], {}, 0, False)}


class DependencyMissing(Exception):
    pass


class Skip(Exception):
    pass


# ---------------------------------------------------------------------------------------------------
# IDResolver: edge cache -> negative cache -> DB (as the Go projector resolves foreign keys)
class Resolver:
    """one per connection; the caches (edge, negative, stats) are shared by all workers like the
    reference's process-wide Ristretto cache"""

    def __init__(self, conn, shared=None):
        self.conn = conn
        if shared is None:
            shared = ({}, {}, {}, threading.Lock())
        self.shared = shared
        self.edge, self.neg, self.stats, self.lock = shared

    def _count(self, et, res):
        k = et + ':' + res
        with self.lock:
            self.stats[k] = self.stats.get(k, 0) + 1

    def set(self, et, key, id_):
        self.edge[et + ':' + key] = id_

    def delete(self, et, key):
        self.edge.pop(et + ':' + key, None)

    def resolve(self, et, key, sql, params, exactly_one=False):
        k = et + ':' + key
        v = self.edge.get(k)
        if v is not None:
            self.neg.pop(k, None)
            self._count(et, 'cache_hit')
            return v
        exp = self.neg.get(k)
        if exp is not None:
            if exp > time.monotonic():
                self._count(et, 'neg_cache_hit')
                return None
            self.neg.pop(k, None)
        rows = self.conn.execute(sql, params).fetchall()
        if not rows:
            self.neg[k] = time.monotonic() + NEG_TTL
            self._count(et, 'db_miss')
            return None
        if exactly_one and len(rows) > 1:
            raise RuntimeError('%s %s: not singular' % (et, key))
        self._count(et, 'db_hit')
        self.edge[k] = rows[0][0]
        return rows[0][0]


# ---------------------------------------------------------------------------------------------------
class Projector:
    def __init__(self, conn, shared=None):
        self.conn = conn
        self.r = Resolver(conn, shared)
        self.sql_cache = {}
        self.statements = 0
        self.commits = 0  # auto-committed statements + explicit transactions

    def x(self, sql, params=()):
        self.statements += 1
        return self.conn.execute(sql, params)

    def upsert(self, table, cols, conflict, update=None, returning=True, conflict_expr=None):
        """INSERT ... ON CONFLICT (conflict) DO UPDATE SET <update> RETURNING id.
        update=None -> ent "UpdateNewValues": every inserted column except created_at."""
        names = tuple(cols)
        if update is None:
            update = tuple(c for c in names if c != 'created_at')
        key = (table, names, conflict, tuple(update))
        sql = self.sql_cache.get(key)
        if sql is None:
            sql = 'INSERT INTO "%s" (%s) VALUES (%s) ON CONFLICT (%s) DO UPDATE SET %s RETURNING "id"' % (
                table, ', '.join('"%s"' % c for c in names), ', '.join(['%s'] * len(names)),
                ', '.join('"%s"' % c for c in conflict),
                ', '.join('"%s" = "excluded"."%s"' % (c, c) for c in update))
            self.sql_cache[key] = sql
        return self.x(sql, tuple(cols[c] for c in names)).fetchone()[0]

    # -- FK lookups (natural keys) --
    def team_id(self, name):
        return self.r.resolve('team', name, 'SELECT "teams"."id" FROM "teams" WHERE "teams"."name" = %s LIMIT 2',
                              (name,))

    def zone_id(self, name):
        return self.r.resolve('zone', name, 'SELECT "zones"."id" FROM "zones" WHERE "zones"."name" = %s LIMIT 2',
                              (name,))

    def group_id(self, name):
        return self.r.resolve('group', name,
                              'SELECT "groups"."id" FROM "groups" WHERE "groups"."name" = %s LIMIT 2', (name,))

    def app_id(self, name, team):
        return self.r.resolve(
            'application', '%s:%s' % (name, team),
            'SELECT "applications"."id" FROM "applications" WHERE "applications"."name" = %s AND '
            '"applications"."team_applications" IN (SELECT "teams"."id" FROM "teams" WHERE "teams"."name" = %s) LIMIT 2',
            (name, team))

    def require_app(self, name, team):
        i = self.app_id(name, team)
        if i is None:
            raise DependencyMissing('application %s:%s' % (name, team))
        return i

    # -- kinds --
    def zone(self, o):
        m, s, st = o['metadata'], o.get('spec') or {}, o.get('status') or {}
        gw = None
        for p in ((s.get('gateway') or {}).get('presets') or []):
            if p.get('default'):
                gw = ''
                for u in p.get('urls') or []:
                    if not u.get('hidden'):
                        gw = '%s://%s%s%s' % (u.get('scheme') or 'https', u['hostname'],
                                              ':%d' % u['port'] if u.get('port') else '', u.get('basePath') or '')
                        break
                break
        links = st.get('links') or {}
        cols = {'environment': env_of(o), 'name': m['name'], 'gateway_url': gw,
                'issuer_url': links.get('gatewayIssuer') or None, 'permissions_url': links.get('permissionsUrl') or None,
                'visibility': (s.get('visibility') or '').upper()}
        i = self.upsert('zones', cols, ('name',), ('visibility', 'environment', 'gateway_url', 'issuer_url',
                                                    'permissions_url'))
        self.r.set('zone', m['name'], i)

    def group(self, o):
        m, s = o['metadata'], o.get('spec') or {}
        cols = {'environment': env_of(o), 'namespace': m['namespace'], 'name': m['name'],
                'display_name': s.get('displayName'), 'description': s.get('description') or ''}
        i = self.upsert('groups', cols, ('name',), ('display_name', 'description', 'environment', 'namespace'))
        self.r.set('group', m['name'], i)

    def team(self, o):
        m, s, st = o['metadata'], o.get('spec') or {}, o.get('status') or {}
        gid = self.group_id(s['group']) if s.get('group') else None
        phase, msg = status_of(o)
        t = now()
        cols = {'created_at': t, 'last_modified_at': t, 'status_phase': phase, 'status_message': msg,
                'environment': env_of(o), 'namespace': m['namespace'], 'name': m['name'], 'email': s.get('email'),
                'display_name': s.get('displayName', ''), 'description': s.get('description', ''),
                'category': (s.get('category') or '').upper(),
                'team_token': s.get('teamToken') or st.get('teamToken') or None}
        upd = ['email', 'category', 'status_phase', 'status_message', 'environment', 'namespace', 'description',
               'display_name', 'team_token']
        if gid is not None:
            cols['group_teams'] = gid
            upd.append('group_teams')
        with self.conn.transaction():
            tid = self.upsert('teams', cols, ('name',), tuple(upd))
            ids = []
            for mem in s.get('members') or []:
                ids.append(self.upsert('members', {'name': mem['name'], 'email': mem['email'], 'team_members': tid},
                                       ('email', 'team_members'), ('name',)))
            self.x('DELETE FROM "members" WHERE "members"."team_members" = %s AND NOT ("members"."id" = ANY(%s))',
                   (tid, ids))
        self.commits += 1
        self.r.set('team', m['name'], tid)
        return 'tx'

    def application(self, o):
        m, s, st = o['metadata'], o.get('spec') or {}, o.get('status') or {}
        team = s.get('team')
        tid = self.team_id(team)
        if tid is None:
            raise DependencyMissing('team ' + team)
        zname = (s.get('zone') or {}).get('name')
        zid = self.zone_id(zname)
        if zid is None:
            raise DependencyMissing('zone %s' % zname)
        zone = self.x('SELECT "zones"."id", "zones"."environment", "zones"."name", "zones"."gateway_url", '
                      '"zones"."issuer_url", "zones"."permissions_url", "zones"."visibility" FROM "zones" '
                      'WHERE "zones"."id" = %s LIMIT 2', (zid,)).fetchone()
        client_id = st.get('clientId') or None
        perm_url = None
        if zone[5]:
            ps = self.r.resolve(
                'permissionset', '%s:%s' % (m['name'], team),
                'SELECT "permission_sets"."id" FROM "permission_sets" WHERE "permission_sets"."application_permission_set" '
                'IN (SELECT "applications"."id" FROM "applications" WHERE "applications"."name" = %s AND '
                '"applications"."team_applications" IN (SELECT "teams"."id" FROM "teams" WHERE "teams"."name" = %s)) LIMIT 2',
                (m['name'], team))
            if ps is not None and client_id:
                from urllib.parse import quote
                perm_url = '%s?application=%s' % (zone[5], quote(client_id, safe=''))
        # secret rotation phase
        phase_r, msg_r = 'DONE', None
        rot = None
        for c in st.get('conditions') or []:
            if c.get('type') == 'SecretRotation':
                rot = c
                break
        if rot is not None:
            reason, cmsg = rot.get('reason'), rot.get('message') or None
            if reason == 'InProgress':
                phase_r, msg_r = 'ROTATING', cmsg
            elif reason == 'Success':
                exp = parse_time(st.get('rotatedExpiresAt'))
                n = now()
                if exp is not None and exp > n:
                    lt = parse_time(rot.get('lastTransitionTime')) or n
                    total = (exp - lt).total_seconds()
                    left = (exp - n).total_seconds()
                    phase_r = 'GRACE_PERIOD_EXPIRING' if total <= 0 or left / total < 0.2 else 'GRACE_PERIOD_ACTIVE'
                    msg_r = cmsg
            elif reason in ('Failed', 'Error'):
                phase_r, msg_r = 'FAILED', cmsg
            else:
                phase_r, msg_r = 'ROTATING', cmsg
        ipr = (s.get('security') or {}).get('ipRestrictions') or {}
        ip = drop_empty({'allow': ipr.get('allow'), 'deny': ipr.get('deny')})
        ext = [{'id': e.get('id'), 'scheme': e.get('scheme')} for e in s.get('externalIds') or []]
        phase, msg = status_of(o)
        t = now()
        cols = {'created_at': t, 'last_modified_at': t, 'status_phase': phase, 'status_message': msg,
                'environment': env_of(o), 'namespace': m['namespace'], 'name': m['name'],
                'client_id': client_id, 'client_secret': s.get('secret') or None,
                'rotated_client_secret': st.get('rotatedClientSecret') or None,
                'rotated_expires_at': parse_time(st.get('rotatedExpiresAt')),
                'current_expires_at': parse_time(st.get('currentExpiresAt')),
                'secret_rotation_phase': phase_r, 'secret_rotation_message': msg_r,
                'external_ids': Jsonb(ext) if ext else None, 'ip_restrictions': Jsonb(ip) if ip else None,
                'permissions_url': perm_url, 'team_applications': tid, 'zone_applications': zid}
        upd = ['status_phase', 'status_message', 'environment', 'namespace', 'secret_rotation_phase']
        if cols['client_id'] is not None:
            upd.append('client_id')
        if cols['client_secret'] is not None:
            upd.append('client_secret')
        upd += ['rotated_client_secret', 'rotated_expires_at', 'current_expires_at', 'secret_rotation_message',
                'ip_restrictions', 'external_ids', 'permissions_url']
        i = self.upsert('applications', cols, ('name', 'team_applications'), tuple(upd))
        self.r.set('application', '%s:%s' % (m['name'], team), i)

    def api(self, o):
        m, s, st = o['metadata'], o.get('spec') or {}, o.get('status') or {}
        team = team_from_ns(m['namespace'])
        tid = self.team_id(team)
        if tid is None:
            raise DependencyMissing('team ' + team)
        phase, msg = status_of(o)
        t = now()
        cols = {'created_at': t, 'last_modified_at': t, 'status_phase': phase, 'status_message': msg,
                'namespace': m['namespace'], 'base_path': s['basePath'], 'version': s['version']}
        if s.get('category'):
            cols['category'] = s['category']
        cols['oauth2_scopes'] = Jsonb(s.get('oauth2Scopes') or [])
        cols['x_vendor'] = bool(s.get('xVendor'))
        if s.get('specification'):
            cols['specification'] = s['specification']
        cols['active'] = bool(st.get('active'))
        cols['team_apis'] = tid
        i = self.upsert('apis', cols, ('base_path', 'team_apis'))
        self.r.set('api', '%s:%s' % (s['basePath'], team), i)
        if cols['active']:
            self.r.set('api_active', s['basePath'], i)
        else:
            self.r.delete('api_active', s['basePath'])

    def api_exposure(self, o):
        m, s, st = o['metadata'], o.get('spec') or {}, o.get('status') or {}
        team = team_from_ns(m['namespace'])
        aid = self.require_app(label(o, APP_LABEL), team)
        bp = s['apiBasePath']
        active = bool(st.get('active'))
        api_id = None
        if active:
            api_id = self.r.resolve('api_active', bp, 'SELECT "apis"."id" FROM "apis" WHERE "apis"."base_path" = %s '
                                    'AND "apis"."active" = true LIMIT 2', (bp,), exactly_one=True)
        sec_in = (s.get('security') or {}).get('m2m')
        sec = {}
        feats = ['LAST_MILE_SECURITY']
        if sec_in is not None:
            m2m = {}
            if sec_in.get('externalIDP'):
                e = sec_in['externalIDP']
                m2m['externalIDP'] = {'tokenEndpoint': e.get('tokenEndpoint'), 'tokenRequest': e.get('tokenRequest', ''),
                                      'grantType': e.get('grantType', ''), 'basic': e.get('basic'),
                                      'client': e.get('client')}
                feats.append('EXTERNAL_IDP')
            if sec_in.get('scopes'):
                m2m['scopes'] = sec_in['scopes']
                feats.append('CUSTOM_SCOPES')
            if sec_in.get('basic'):
                m2m['basic'] = sec_in['basic']
                feats.append('BASIC_AUTH')
            sec = {'m2m': m2m}
        tr_in = s.get('traffic') or {}
        traffic = {}
        if tr_in.get('rateLimit'):
            traffic['rateLimit'] = tr_in['rateLimit']
            feats.append('RATE_LIMIT')
        if 'failover' in tr_in and tr_in['failover'] is not None:
            traffic['failover'] = {'zones': [z.get('name') for z in tr_in['failover'].get('zones') or []]} \
                if tr_in['failover'].get('zones') else {}
            feats.append('FAILOVER')
        if tr_in.get('circuitBreaker'):
            feats.append('CIRCUIT_BREAKER')
        ups = [{'url': u.get('url'), 'weight': u.get('weight', 0)} for u in s.get('upstreams') or []]
        if len(ups) > 1:
            feats.append('LOAD_BALANCING')
        if s.get('transformation'):
            feats.append('HEADER_TRANSFORMATION')
        appr = s.get('approval') or {}
        phase, msg = status_of(o)
        t = now()
        cols = {'created_at': t, 'last_modified_at': t, 'status_phase': phase, 'status_message': msg,
                'environment': env_of(o), 'namespace': m['namespace'], 'base_path': bp,
                'visibility': (s.get('visibility') or '').upper(), 'active': active, 'features': Jsonb(feats),
                'upstreams': Jsonb(ups), 'security': Jsonb(sec), 'traffic': Jsonb(traffic),
                'approval_config': Jsonb({'strategy': map_strategy(appr.get('strategy')),
                                          'trustedTeams': appr.get('trustedTeams')})}
        if api_id is not None:
            cols['api_exposures'] = api_id
        cols['application_exposed_apis'] = aid
        i = self.upsert('api_exposures', cols, ('base_path', 'application_exposed_apis'))
        self.r.set('apiexposure', '%s:%s:%s' % (bp, label(o, APP_LABEL), team), i)
        if active:  # back-link orphaned subscriptions
            self.x('UPDATE "api_subscriptions" SET "api_subscription_target" = %s, "last_modified_at" = %s '
                   'WHERE "api_subscriptions"."base_path" = %s AND "api_subscriptions"."api_subscription_target" IS NULL',
                   (i, now(), bp))
            return 2
        return 1

    def api_subscription(self, o):
        m, s, st = o['metadata'], o.get('spec') or {}, o.get('status') or {}
        team = team_from_ns(m['namespace'])
        aid = self.require_app(((s.get('requestor') or {}).get('application') or {}).get('name'), team)
        bp = s['apiBasePath']
        target = self.r.resolve('apiexposure', 'bp:' + bp,
                                'SELECT "api_exposures"."id" FROM "api_exposures" WHERE "api_exposures"."base_path" = %s '
                                'AND "api_exposures"."active" = true LIMIT 1', (bp,))
        sec_in = s.get('security')
        m2m_in = (sec_in or {}).get('m2m')
        method = 'NONE'
        if m2m_in:
            if m2m_in.get('client'):
                method = 'OAUTH2_CLIENT'
            elif m2m_in.get('basic'):
                method = 'BASIC_AUTH'
            elif m2m_in.get('scopes'):
                method = 'SCOPES_ONLY'
        if sec_in is None:
            sec = None
        elif m2m_in is None:
            sec = {}
        else:
            sec = {'m2m': drop_empty({'client': m2m_in.get('client'), 'basic': m2m_in.get('basic'),
                                      'scopes': m2m_in.get('scopes')})}
        phase, msg = status_of(o)
        t = now()
        cols = {'created_at': t, 'last_modified_at': t, 'status_phase': phase, 'status_message': msg,
                'environment': env_of(o), 'namespace': m['namespace'], 'name': m['name'], 'base_path': bp,
                'm2m_auth_method': method, 'gateway_url': st.get('gatewayUrl', ''), 'security': Jsonb(sec)}
        if target is not None:
            cols['api_subscription_target'] = target
        cols['application_subscribed_apis'] = aid
        i = self.upsert('api_subscriptions', cols, ('base_path', 'application_subscribed_apis'))
        self.r.set('apisubscription', 'meta:%s:%s' % (m['namespace'], m['name']), i)
        if target is None:
            self.x('UPDATE "api_subscriptions" SET "api_subscription_target" = NULL, "last_modified_at" = %s '
                   'WHERE "api_subscriptions"."id" = %s', (now(), i))
            return 2
        return 1

    def event_type(self, o):
        m, s, st = o['metadata'], o.get('spec') or {}, o.get('status') or {}
        team = team_from_ns(m['namespace'])
        tid = self.team_id(team)
        if tid is None:
            raise DependencyMissing('team ' + team)
        phase, msg = status_of(o)
        t = now()
        cols = {'created_at': t, 'last_modified_at': t, 'status_phase': phase, 'status_message': msg,
                'namespace': m['namespace'], 'event_type': s['type'], 'version': s['version']}
        if s.get('description'):
            cols['description'] = s['description']
        if s.get('specification'):
            cols['specification'] = s['specification']
        cols['active'] = bool(st.get('active'))
        cols['team_event_types'] = tid
        i = self.upsert('event_types', cols, ('event_type', 'team_event_types'))
        self.r.set('eventtype', '%s:%s' % (s['type'], team), i)
        if cols['active']:
            self.r.set('eventtype_active', s['type'], i)
        else:
            self.r.delete('eventtype_active', s['type'])

    @staticmethod
    def trigger(tr):
        if tr is None:
            return None
        out = {}
        rf = tr.get('responseFilter')
        if rf is not None:
            out['responseFilter'] = {'paths': rf.get('paths'), 'mode': rf.get('mode', '')}
        sf = tr.get('selectionFilter')
        if sf is not None:
            e = sf.get('expression')
            out['selectionFilter'] = {'attributes': sf.get('attributes'),
                                      'expression': json.dumps(e, separators=(',', ':')) if e is not None else ''}
        return out

    def event_exposure(self, o):
        m, s, st = o['metadata'], o.get('spec') or {}, o.get('status') or {}
        team = team_from_ns(m['namespace'])
        aid = self.require_app(label(o, APP_LABEL), team)
        et = s['eventType']
        active = bool(st.get('active'))
        et_id = None
        if active:
            et_id = self.r.resolve('eventtype_active', et, 'SELECT "event_types"."id" FROM "event_types" WHERE '
                                   '"event_types"."event_type" = %s AND "event_types"."active" = true LIMIT 2', (et,),
                                   exactly_one=True)
        appr = s.get('approval') or {}
        scopes = [{'name': sc.get('name'), 'trigger': self.trigger(sc.get('trigger')) or {}}
                  for sc in s.get('scopes') or []]
        phase, msg = status_of(o)
        t = now()
        cols = {'created_at': t, 'last_modified_at': t, 'status_phase': phase, 'status_message': msg,
                'environment': env_of(o), 'namespace': m['namespace'], 'event_type': et,
                'visibility': (s.get('visibility') or '').upper(), 'active': active, 'event_scopes': Jsonb(scopes),
                'gateway_publishing_url': st.get('publishURL', ''),
                'approval_config': Jsonb({'strategy': map_strategy(appr.get('strategy')),
                                          'trustedTeams': appr.get('trustedTeams')}),
                'application_exposed_events': aid}
        if et_id is not None:
            cols['event_type_exposures'] = et_id
        i = self.upsert('event_exposures', cols, ('event_type', 'application_exposed_events'))
        self.r.set('eventexposure', '%s:%s:%s' % (et, label(o, APP_LABEL), team), i)
        if active:
            self.x('UPDATE "event_subscriptions" SET "event_subscription_target" = %s, "last_modified_at" = %s '
                   'WHERE "event_subscriptions"."event_type" = %s AND "event_subscriptions"."event_subscription_target" IS NULL',
                   (i, now(), et))
            return 2
        return 1

    def event_subscription(self, o):
        m, s, st = o['metadata'], o.get('spec') or {}, o.get('status') or {}
        team = team_from_ns(m['namespace'])
        aid = self.require_app((s.get('requestor') or {}).get('name'), team)
        et = s['eventType']
        target = self.r.resolve('eventexposure', 'et:' + et,
                                'SELECT "event_exposures"."id" FROM "event_exposures" WHERE "event_exposures"."event_type" = %s '
                                'AND "event_exposures"."active" = true LIMIT 1', (et,))
        d = s.get('delivery') or {}
        dtype = {'Callback': 'CALLBACK', 'ServerSentEvent': 'SERVER_SENT_EVENT'}.get(d.get('type'),
                                                                                     (d.get('type') or '').upper())
        delivery = {'payload': d.get('payload', ''), 'eventRetentionTime': d.get('eventRetentionTime', ''),
                    'circuitBreakerOptOut': bool(d.get('circuitBreakerOptOut')),
                    'retryableStatusCodes': d.get('retryableStatusCodes'),
                    'redeliveriesPerSecond': d.get('redeliveriesPerSecond'),
                    'enforceGetHttpRequestMethodForHealthCheck': bool(d.get('enforceGetHttpRequestMethodForHealthCheck'))}
        phase, msg = status_of(o)
        t = now()
        cols = {'created_at': t, 'last_modified_at': t, 'status_phase': phase, 'status_message': msg,
                'environment': env_of(o), 'namespace': m['namespace'], 'name': m['name'], 'event_type': et,
                'delivery_type': dtype, 'trigger': Jsonb(self.trigger(s.get('trigger'))), 'delivery': Jsonb(delivery),
                'scopes': Jsonb(s.get('scopes'))}
        if d.get('callback'):
            cols['callback_url'] = d['callback']
        cols['gateway_sse_url'] = st.get('url', '')
        cols['application_subscribed_events'] = aid
        if target is not None:
            cols['event_subscription_target'] = target
        i = self.upsert('event_subscriptions', cols, ('event_type', 'application_subscribed_events'))
        self.r.set('eventsubscription', 'meta:%s:%s' % (m['namespace'], m['name']), i)
        if target is None:
            self.x('UPDATE "event_subscriptions" SET "event_subscription_target" = NULL, "last_modified_at" = %s '
                   'WHERE "event_subscriptions"."id" = %s', (now(), i))
            return 2
        return 1

    def permission_set(self, o):
        m, s = o['metadata'], o.get('spec') or {}
        app = label(o, APP_LABEL)
        if not app:
            raise Skip('cp.ei.telekom.de/application label is missing or empty')
        team = team_from_ns(m['namespace'])
        aid = self.require_app(app, team)
        phase, msg = status_of(o)
        t = now()
        cols = {'created_at': t, 'last_modified_at': t, 'status_phase': phase, 'status_message': msg,
                'environment': env_of(o), 'namespace': m['namespace'],
                'permissions': Jsonb([{'role': p.get('role'), 'resource': p.get('resource'), 'actions': p.get('actions')}
                                      for p in s.get('permissions') or []]),
                'application_permission_set': aid}
        i = self.upsert('permission_sets', cols, ('application_permission_set',))
        self.r.set('permissionset', '%s:%s' % (app, team), i)

    def approval_common(self, o, request):
        m, s, st = o['metadata'], o.get('spec') or {}, o.get('status') or {}
        tg = s.get('target') or {}
        if not tg.get('name'):
            raise Skip('spec.target.name is empty')
        if not s.get('action'):
            raise Skip('spec.action is empty')
        kind = tg.get('kind')
        if kind not in ('ApiSubscription', 'EventSubscription'):
            raise Skip('spec.target.kind is not ApiSubscription or EventSubscription')
        dec = s.get('decider') or {}
        if not dec.get('teamName'):
            raise Skip('spec.decider.teamName is empty')
        sns = tg.get('namespace') or m['namespace']
        if kind == 'EventSubscription':
            sub = self.r.resolve('eventsubscription', 'meta:%s:%s' % (sns, tg['name']),
                                 'SELECT "event_subscriptions"."id" FROM "event_subscriptions" WHERE '
                                 '"event_subscriptions"."namespace" = %s AND "event_subscriptions"."name" = %s LIMIT 2',
                                 (sns, tg['name']))
        else:
            sub = self.r.resolve('apisubscription', 'meta:%s:%s' % (sns, tg['name']),
                                 'SELECT "api_subscriptions"."id" FROM "api_subscriptions" WHERE '
                                 '"api_subscriptions"."namespace" = %s AND "api_subscriptions"."name" = %s LIMIT 2',
                                 (sns, tg['name']))
        if sub is None:
            raise DependencyMissing('subscription %s/%s' % (sns, tg['name']))
        rq = s.get('requester') or {}
        props = rq.get('properties')
        requester = {'teamName': rq.get('teamName', ''), 'teamEmail': rq.get('teamEmail', '')}
        if rq.get('reason'):
            requester['reason'] = rq['reason']
        if (rq.get('applicationRef') or {}).get('name'):
            requester['applicationName'] = rq['applicationRef']['name']
        decider = {'teamName': dec['teamName']}
        if dec.get('teamEmail'):
            decider['teamEmail'] = dec['teamEmail']
        decisions = [drop_empty({'name': d.get('name', ''), 'email': d.get('email'), 'comment': d.get('comment')})
                     for d in s.get('decisions') or []]
        for d in decisions:
            d.setdefault('name', '')
        trans = [{'action': a.get('action'), 'toState': a.get('to')} for a in st.get('availableTransitions') or []
                 if request or a.get('to') != 'Expired']
        phase, msg = status_of(o)
        t = now()
        cols = {'created_at': t, 'last_modified_at': t, 'status_phase': phase, 'status_message': msg,
                'environment': env_of(o), 'namespace': m['namespace'], 'action': s['action'],
                'strategy': map_strategy(s.get('strategy')), 'requester': Jsonb(requester), 'decider': Jsonb(decider),
                'decider_team_name': dec['teamName'], 'decisions': Jsonb(decisions),
                'available_transitions': Jsonb(trans),
                'requested_scopes': Jsonb((props or {}).get('scopes') if isinstance(props, dict) else None),
                'name': m['name']}
        if not request and st.get('expiresAt'):
            cols['expires_at'] = parse_time(st['expiresAt'])
        cols['state'] = (s.get('state') or '').upper()
        table = 'approval_requests' if request else 'approvals'
        if request:
            fk = 'event_subscription_approval_requests' if kind == 'EventSubscription' else 'api_subscription_approval_requests'
            other = 'api_subscription_approval_requests' if kind == 'EventSubscription' else 'event_subscription_approval_requests'
        else:
            fk = 'event_subscription_approval' if kind == 'EventSubscription' else 'api_subscription_approval'
            other = 'api_subscription_approval' if kind == 'EventSubscription' else 'event_subscription_approval'
        cols[fk] = sub
        i = self.upsert(table, cols, ('namespace', 'name'))
        # explicit follow-up update: set this kind's FK, clear the other one
        self.x('UPDATE "%s" SET "%s" = %%s, "%s" = NULL, "last_modified_at" = %%s WHERE "%s"."id" = %%s'
               % (table, fk, other, table), (sub, now(), i))
        self.r.set('approvalrequest' if request else 'approval', '%s:%s' % (m['namespace'], m['name']), i)
        return 2

    def approval(self, o):
        return self.approval_common(o, False)

    def approval_request(self, o):
        return self.approval_common(o, True)


HANDLERS = {'Zone': 'zone', 'Group': 'group', 'Team': 'team', 'Application': 'application', 'Api': 'api',
            'ApiExposure': 'api_exposure', 'ApiSubscription': 'api_subscription', 'EventType': 'event_type',
            'EventExposure': 'event_exposure', 'EventSubscription': 'event_subscription',
            'PermissionSet': 'permission_set', 'Approval': 'approval', 'ApprovalRequest': 'approval_request'}


def iter_docs(path):
    with open(path, encoding='utf-8') as fh:
        for line in fh:
            if line.startswith('{'):
                yield line


def process_one(p, kind, h, line, txmode, acc):
    """one object: parse, translate, write; acc = per-worker counters"""
    a = time.perf_counter()
    o = json.loads(line)
    acc['parse'] += time.perf_counter() - a
    try:
        if txmode == 'object' and kind != 'Team':
            with p.conn.transaction():
                h(o)
            p.commits += 1
        else:
            s0 = p.statements
            r = h(o)
            if r != 'tx':
                p.commits += p.statements - s0  # every statement auto-commits
        acc['written'] += 1
    except Skip as e:
        acc['skipped'] += 1
        acc['reasons'][str(e)] = acc['reasons'].get(str(e), 0) + 1
    except DependencyMissing:
        acc['missing'] += 1


def load_world(conn, world, files_by_kind, txmode, workers=1, dsn=None):
    """kinds strictly in KIND_ORDER; within a kind, `workers` connections take objects from a shared
    iterator (workers=1: the calling connection, strictly sequential)."""
    shared = ({}, {}, {}, threading.Lock())
    projs = [Projector(conn, shared)]
    for _ in range(workers - 1):
        projs.append(Projector(psycopg.connect(dsn, autocommit=True), shared))
    per_kind = {}
    total_written = 0
    t_all0 = time.perf_counter()
    db_time_total = 0.0
    for kind in KIND_ORDER:
        fname = files_by_kind.get(kind)
        if fname is None:
            continue
        path = os.path.join(world, fname)
        if kind in NO_TABLE:
            n = sum(1 for _ in iter_docs(path))
            per_kind[kind] = {'documents': n, 'written': 0, 'skipped_no_table': n}
            continue
        stmts0 = sum(p.statements for p in projs)
        commits0 = sum(p.commits for p in projs)
        accs = [{'parse': 0.0, 'written': 0, 'skipped': 0, 'missing': 0, 'reasons': {}, 'n': 0} for _ in projs]
        t0 = time.perf_counter()
        if workers == 1:
            h = getattr(projs[0], HANDLERS[kind])
            for line in iter_docs(path):
                accs[0]['n'] += 1
                process_one(projs[0], kind, h, line, txmode, accs[0])
        else:
            it = iter_docs(path)
            it_lock = threading.Lock()
            errors = []

            def work(i):
                p, acc = projs[i], accs[i]
                h = getattr(p, HANDLERS[kind])
                try:
                    while True:
                        with it_lock:
                            line = next(it, None)
                        if line is None:
                            return
                        acc['n'] += 1
                        process_one(p, kind, h, line, txmode, acc)
                except Exception as e:  # noqa: BLE001
                    errors.append(e)

            ts = [threading.Thread(target=work, args=(i,)) for i in range(workers)]
            for t in ts:
                t.start()
            for t in ts:
                t.join()
            if errors:
                raise errors[0]
        el = time.perf_counter() - t0
        n = sum(a['n'] for a in accs)
        written = sum(a['written'] for a in accs)
        skipped = sum(a['skipped'] for a in accs)
        missing = sum(a['missing'] for a in accs)
        reasons = {}
        for a in accs:
            for k, v in a['reasons'].items():
                reasons[k] = reasons.get(k, 0) + v
        db_time_total += el
        total_written += written
        per_kind[kind] = {'documents': n, 'written': written, 'skipped_by_rule': skipped,
                          'skip_reasons': reasons, 'dependency_missing': missing, 'seconds': round(el, 4),
                          'objects_per_s': round(n / el, 1) if el > 0 else None,
                          'json_parse_seconds': round(sum(a['parse'] for a in accs), 4),
                          'statements': sum(p.statements for p in projs) - stmts0,
                          'commits': sum(p.commits for p in projs) - commits0}
        print('  %-18s %8d docs %8d written %6d skipped %6d dep-missing %8.2f s %9.0f obj/s' % (
            kind, n, written, skipped, missing, el, n / el if el > 0 else 0), flush=True)
    t_all = time.perf_counter() - t_all0
    for p in projs[1:]:
        p.conn.close()
    processed = sum(v['documents'] for k, v in per_kind.items() if k not in NO_TABLE)
    return {
        'txmode': txmode,
        'workers': workers,
        'seconds_total': round(t_all, 3),
        'seconds_reference_kinds': round(db_time_total, 3),
        'documents_processed_reference_kinds': processed,
        'objects_written': total_written,
        'objects_per_s': round(processed / db_time_total, 1),
        'written_per_s': round(total_written / db_time_total, 1),
        'statements': sum(p.statements for p in projs), 'commits': sum(p.commits for p in projs),
        'skipped_kinds_no_table': sorted(NO_TABLE),
        'documents_skipped_no_table': sum(v.get('skipped_no_table', 0) for v in per_kind.values()),
        'per_kind': per_kind,
        'resolver': dict(sorted(shared[2].items())),
    }


# ---------------------------------------------------------------------------------------------------
# P2 queries (SQL as ent/entgql would send it; see README.md for the GraphQL operations)
APP_COLS = ('id, created_at, last_modified_at, status_phase, status_message, environment, namespace, name, client_id, '
            'client_secret, rotated_client_secret, rotated_expires_at, current_expires_at, secret_rotation_phase, '
            'secret_rotation_message, external_ids, ip_restrictions, permissions_url, team_applications, zone_applications')
EXP_COLS = ('id, created_at, last_modified_at, status_phase, status_message, environment, namespace, base_path, '
            'visibility, active, features, upstreams, security, traffic, approval_config, api_version, api_exposures, '
            'application_exposed_apis')
SUB_COLS = ('id, created_at, last_modified_at, status_phase, status_message, environment, namespace, name, base_path, '
            'm2m_auth_method, gateway_url, security, api_subscription_target, application_subscribed_apis')
APPR_COLS = ('id, created_at, last_modified_at, status_phase, status_message, environment, namespace, action, '
             'strategy, requester, decider, decider_team_name, decisions, available_transitions, requested_scopes, '
             'name, expires_at, state, api_subscription_approval, event_subscription_approval')


def qual(table, cols):
    return ', '.join('"%s"."%s"' % (table, c.strip()) for c in cols.split(','))


TEAM_IN = 'SELECT "teams"."id" FROM "teams" WHERE "teams"."name" IN (%s)'
APPS_OF_TEAM = ('SELECT "applications"."id" FROM "applications" WHERE "applications"."team_applications" IN (' +
                TEAM_IN + ')')
APP_FILTER = '"applications"."team_applications" IN (' + TEAM_IN + ')'

SQL = {
    'Q1_count': 'SELECT COUNT(*) FROM "applications" WHERE ' + APP_FILTER,
    'Q1_page': 'SELECT ' + qual('applications', APP_COLS) + ' FROM "applications" WHERE ' + APP_FILTER +
               ' ORDER BY "applications"."id" ASC LIMIT 51',
    'Q1_exposures': 'SELECT ' + qual('api_exposures', EXP_COLS) + ' FROM "api_exposures" WHERE '
                    '"api_exposures"."application_exposed_apis" IN ({ids}) AND '
                    '"api_exposures"."application_exposed_apis" IN (' + APPS_OF_TEAM + ') '
                    'ORDER BY "api_exposures"."id" ASC',
    'Q1_subscriptions': 'SELECT ' + qual('api_subscriptions', SUB_COLS) + ' FROM "api_subscriptions" WHERE '
                        '"api_subscriptions"."application_subscribed_apis" IN ({ids}) AND '
                        '"api_subscriptions"."application_subscribed_apis" IN (' + APPS_OF_TEAM + ') '
                        'ORDER BY "api_subscriptions"."id" ASC',
    'Q2_count': 'SELECT COUNT(*) FROM "api_subscriptions"',
    'Q2_page': 'SELECT ' + qual('api_subscriptions', SUB_COLS) + ' FROM "api_subscriptions" '
               'WHERE "api_subscriptions"."id" > %s ORDER BY "api_subscriptions"."id" ASC LIMIT 51',
}
APPROVAL_FILTER = (
    '("approvals"."api_subscription_approval" IN (SELECT "api_subscriptions"."id" FROM "api_subscriptions" WHERE '
    '"api_subscriptions"."application_subscribed_apis" IN (' + APPS_OF_TEAM + ')) '
    'OR "approvals"."api_subscription_approval" IN (SELECT "api_subscriptions"."id" FROM "api_subscriptions" WHERE '
    '"api_subscriptions"."api_subscription_target" IN (SELECT "api_exposures"."id" FROM "api_exposures" WHERE '
    '"api_exposures"."application_exposed_apis" IN (' + APPS_OF_TEAM + '))) '
    'OR "approvals"."event_subscription_approval" IN (SELECT "event_subscriptions"."id" FROM "event_subscriptions" WHERE '
    '"event_subscriptions"."application_subscribed_events" IN (' + APPS_OF_TEAM + ')) '
    'OR "approvals"."event_subscription_approval" IN (SELECT "event_subscriptions"."id" FROM "event_subscriptions" WHERE '
    '"event_subscriptions"."event_subscription_target" IN (SELECT "event_exposures"."id" FROM "event_exposures" WHERE '
    '"event_exposures"."application_exposed_events" IN (' + APPS_OF_TEAM + '))))')
SQL['Q3_count'] = 'SELECT COUNT(*) FROM "approvals" WHERE ' + APPROVAL_FILTER
SQL['Q3_page'] = ('SELECT ' + qual('approvals', APPR_COLS) + ' FROM "approvals" WHERE ' + APPROVAL_FILTER +
                  ' ORDER BY "approvals"."id" ASC LIMIT 51')
SQL['Q4_node'] = ('SELECT ' + qual('applications', APP_COLS) + ' FROM "applications" WHERE "applications"."id" = %s AND '
                  + APP_FILTER + ' LIMIT 2')

GRAPHQL = {
    'Q1': 'query { applications(first: 50) { totalCount edges { cursor node { id name clientID statusPhase '
          'exposedApis { edges { node { id basePath visibility active } } } '
          'subscribedApis { edges { node { id name basePath statusPhase } } } } } pageInfo { hasNextPage endCursor } } }'
          '  -- as a team viewer V=[team]',
    'Q2': 'query($after: Cursor) { apiSubscriptions(first: 50, after: $after) { totalCount edges { node { id name '
          'basePath statusPhase } } pageInfo { hasNextPage endCursor } } }  -- admin viewer, $after = cursor of the '
          '10000th row in the default (id ASC) order',
    'Q3': 'query { approvals(first: 50) { totalCount edges { node { id name state strategy action deciderTeamName } } '
          'pageInfo { hasNextPage endCursor } } }  -- as a team viewer: OR rule (subscriber side + provider side)',
    'Q4': 'query($id: ID!) { node(id: $id) { id ... on Application { name clientID statusPhase } } }  -- team viewer',
}


# --- "full" variants: the exact GraphQL documents of benches/http_queries.rs (our side), executed the way
# gqlgen + entgql would: ent edges selected in the document are eager-loaded (one IN query per level),
# nested connections with `first` use entgql's ROW_NUMBER() window query plus a grouped COUNT for
# totalCount, and the custom system-context resolvers (`ownerTeam`, `target`) run once per node (N+1),
# loading the Info type's owner application -> team -> group (as the Go server's Info types do). MODELLED:
# the Go resolvers' exact statements are not known here.
TEAM_COLS = ('id, created_at, last_modified_at, status_phase, status_message, environment, namespace, name, email, '
             'display_name, description, category, team_token, group_teams')
GROUP_COLS = 'id, environment, namespace, name, display_name, description'
ZONE_COLS = 'id, environment, name, gateway_url, issuer_url, permissions_url, visibility, api_subscription_failover_zones'
EEXP_COLS = ('id, created_at, last_modified_at, status_phase, status_message, environment, namespace, event_type, '
             'visibility, active, event_scopes, gateway_publishing_url, approval_config, application_exposed_events, '
             'event_type_exposures')
ESUB_COLS = ('id, created_at, last_modified_at, status_phase, status_message, environment, namespace, name, event_type, '
             'delivery_type, trigger, delivery, scopes, callback_url, gateway_sse_url, application_subscribed_events, '
             'event_subscription_target')
NESTED = {  # edge -> (table, fk column, columns)
    'exposedApis': ('api_exposures', 'application_exposed_apis', EXP_COLS),
    'subscribedApis': ('api_subscriptions', 'application_subscribed_apis', SUB_COLS),
    'exposedEvents': ('event_exposures', 'application_exposed_events', EEXP_COLS),
    'subscribedEvents': ('event_subscriptions', 'application_subscribed_events', ESUB_COLS),
}
FULL_SQL = {
    'owner_team_of_app': 'SELECT ' + qual('teams', TEAM_COLS) + ' FROM "teams" WHERE "teams"."id" IN (SELECT '
                         '"applications"."team_applications" FROM "applications" WHERE "applications"."id" = %s) LIMIT 2',
    'group_by_id': 'SELECT ' + qual('groups', GROUP_COLS) + ' FROM "groups" WHERE "groups"."id" IN ({ids})',
    'zones_by_id': 'SELECT ' + qual('zones', ZONE_COLS) + ' FROM "zones" WHERE "zones"."id" IN ({ids})',
    'apps_by_id': 'SELECT ' + qual('applications', APP_COLS) + ' FROM "applications" WHERE "applications"."id" IN ({ids})',
    'teams_by_id': 'SELECT ' + qual('teams', TEAM_COLS) + ' FROM "teams" WHERE "teams"."id" IN ({ids})',
    'target_of_sub': 'SELECT ' + qual('api_exposures', EXP_COLS) + ' FROM "api_exposures" WHERE "api_exposures"."id" IN '
                     '(SELECT "api_subscriptions"."api_subscription_target" FROM "api_subscriptions" WHERE '
                     '"api_subscriptions"."id" = %s) LIMIT 2',
}
for edge, (tbl, fk, cols) in NESTED.items():
    filt = '"%s"."%s" IN ({ids}) AND "%s"."%s" IN (%s)' % (tbl, fk, tbl, fk, APPS_OF_TEAM)
    FULL_SQL['nested_%s_page' % edge] = (
        'SELECT * FROM (SELECT %s, ROW_NUMBER() OVER (PARTITION BY "%s"."%s" ORDER BY "%s"."id" ASC) AS "row_number" '
        'FROM "%s" WHERE %s) AS "t1" WHERE "t1"."row_number" <= 21 ORDER BY "t1"."%s", "t1"."id"'
        % (qual(tbl, cols), tbl, fk, tbl, tbl, filt, fk))
    FULL_SQL['nested_%s_count' % edge] = ('SELECT "%s"."%s", COUNT(*) FROM "%s" WHERE %s GROUP BY "%s"."%s"'
                                          % (tbl, fk, tbl, filt, tbl, fk))
GRAPHQL_FULL = {
    'Q1_full': 'benches/http_queries.rs Q1: applications(first: 50) { totalCount pageInfo edges { cursor node { id name '
               'statusPhase secretRotationPhase zone { name } ownerTeam { name } exposedApis(first: 20) { totalCount ... } '
               'subscribedApis(first: 20) { totalCount edges { node { ... target { basePath } } } } exposedEvents(first: 20) '
               '{ totalCount ... } subscribedEvents(first: 20) { totalCount ... } } } }  -- team viewer',
    'Q2_full': 'benches/http_queries.rs Q2: apiSubscriptions(first: 50, after: $after) { totalCount pageInfo edges { cursor '
               'node { id name basePath statusPhase owner { name } target { basePath } } } }  -- admin viewer',
    'Q4_full': 'benches/http_queries.rs Q4: node(id: $id) { id ... on Application { name statusPhase clientID '
               'ownerTeam { name } zone { name } } }  -- team viewer',
}


def _in(n):
    return ', '.join(['%s'] * n)


def team_info(conn, app_id):
    """custom resolver ownerTeam / TeamInfo: owning team (+ its group for groupName), system context"""
    n = 1
    t = conn.execute(FULL_SQL['owner_team_of_app'], (app_id,)).fetchone()
    if t is not None and t[13] is not None:
        conn.execute(FULL_SQL['group_by_id'].format(ids='%s'), (t[13],)).fetchall()
        n += 1
    return n


def exposure_info(conn, sub_id):
    """custom resolver ApiSubscription.target -> ApiExposureInfo (owner application, its team, group)"""
    n = 1
    e = conn.execute(FULL_SQL['target_of_sub'], (sub_id,)).fetchone()
    if e is None:
        return n
    a = conn.execute(FULL_SQL['apps_by_id'].format(ids='%s'), (e[17],)).fetchone()
    t = conn.execute(FULL_SQL['teams_by_id'].format(ids='%s'), (a[18],)).fetchone()
    n += 2
    if t[13] is not None:
        conn.execute(FULL_SQL['group_by_id'].format(ids='%s'), (t[13],)).fetchall()
        n += 1
    return n


def run_full(conn, name, team, after=None, app_id=None):
    if name == 'Q1_full':
        total = conn.execute(SQL['Q1_count'], (team,)).fetchone()[0]
        page = conn.execute(SQL['Q1_page'], (team,)).fetchall()[:50]
        ids = [r[0] for r in page]
        st = 2
        zids = sorted({r[19] for r in page})
        conn.execute(FULL_SQL['zones_by_id'].format(ids=_in(len(zids))), zids).fetchall()
        st += 1
        for i in ids:
            st += team_info(conn, i)
        counts = {}
        subs = []
        for edge in NESTED:
            rows = conn.execute(FULL_SQL['nested_%s_page' % edge].format(ids=_in(len(ids))), (*ids, team)).fetchall()
            conn.execute(FULL_SQL['nested_%s_count' % edge].format(ids=_in(len(ids))), (*ids, team)).fetchall()
            st += 2
            counts[edge] = len(rows)
            if edge == 'subscribedApis':
                subs = [r[0] for r in rows]
        for sid in subs:
            st += exposure_info(conn, sid)
        return {'totalCount': total, 'nodes': len(page), 'nested_rows': counts, 'statements': st}
    if name == 'Q2_full':
        total = conn.execute(SQL['Q2_count']).fetchone()[0]
        page = conn.execute(SQL['Q2_page'], (after,)).fetchall()[:50]
        owners = sorted({r[13] for r in page})
        conn.execute(FULL_SQL['apps_by_id'].format(ids=_in(len(owners))), owners).fetchall()
        st = 3
        for r in page:
            st += exposure_info(conn, r[0])
        return {'totalCount': total, 'nodes': len(page), 'statements': st}
    if name == 'Q4_full':
        row = conn.execute(SQL['Q4_node'], (app_id, team)).fetchone()
        st = 1
        if row is not None:
            st += team_info(conn, app_id)
            conn.execute(FULL_SQL['zones_by_id'].format(ids='%s'), (row[19],)).fetchall()
            st += 1
        return {'found': row is not None, 'statements': st}
    raise ValueError(name)


def run_query(conn, name, team, ids=None, after=None, app_id=None):
    """returns rows fetched; every statement is a round trip"""
    if name == 'Q1':
        total = conn.execute(SQL['Q1_count'], (team,)).fetchone()[0]
        page = conn.execute(SQL['Q1_page'], (team,)).fetchall()
        page = page[:50]
        ids = [r[0] for r in page]
        ph = ', '.join(['%s'] * len(ids))
        exps = conn.execute(SQL['Q1_exposures'].format(ids=ph), (*ids, team)).fetchall()
        subs = conn.execute(SQL['Q1_subscriptions'].format(ids=ph), (*ids, team)).fetchall()
        return {'totalCount': total, 'nodes': len(page), 'exposures': len(exps), 'subscriptions': len(subs),
                'statements': 4}
    if name == 'Q2':
        total = conn.execute(SQL['Q2_count']).fetchone()[0]
        page = conn.execute(SQL['Q2_page'], (after,)).fetchall()
        return {'totalCount': total, 'nodes': min(len(page), 50), 'hasNextPage': len(page) > 50, 'statements': 2}
    if name == 'Q3':
        p = (team,) * 4
        total = conn.execute(SQL['Q3_count'], p).fetchone()[0]
        page = conn.execute(SQL['Q3_page'], p).fetchall()
        return {'totalCount': total, 'nodes': min(len(page), 50), 'statements': 2}
    if name == 'Q4':
        rows = conn.execute(SQL['Q4_node'], (app_id, team)).fetchall()
        return {'found': len(rows) == 1, 'statements': 1}
    if name.endswith('_full'):
        return run_full(conn, name, team, after=after, app_id=app_id)
    raise ValueError(name)


def pct(sorted_vals, p):
    if not sorted_vals:
        return None
    k = max(0, min(len(sorted_vals) - 1, int(round(p / 100.0 * len(sorted_vals) + 0.5)) - 1))
    return sorted_vals[k]


QUERIES = ('Q1', 'Q2', 'Q3', 'Q4', 'Q1_full', 'Q2_full', 'Q4_full')


def measure(conn, params, iterations, warmup):
    out = {}
    for q in QUERIES:
        kw = params[q]
        shape = None
        for _ in range(warmup):
            shape = run_query(conn, q, **kw)
        lat = []
        for _ in range(iterations):
            t0 = time.perf_counter_ns()
            run_query(conn, q, **kw)
            lat.append((time.perf_counter_ns() - t0) / 1e6)
        lat.sort()
        out[q] = {'result_shape': shape, 'iterations': iterations, 'warmup': warmup,
                  'p50_ms': round(pct(lat, 50), 4), 'p90_ms': round(pct(lat, 90), 4), 'p99_ms': round(pct(lat, 99), 4),
                  'mean_ms': round(statistics.fmean(lat), 4), 'min_ms': round(lat[0], 4), 'max_ms': round(lat[-1], 4)}
        print('  %s p50 %8.3f ms  p99 %8.3f ms  (mean %.3f, n=%d) %s' % (
            q, out[q]['p50_ms'], out[q]['p99_ms'], out[q]['mean_ms'], iterations, shape), flush=True)
    return out


def teams_by_load(world, files_by_kind):
    """same choice as benches/support/mod.rs teams_by_load (our side): most applications, then
    max(min(approvals as requester, as decider)), then their sum, then name"""
    t = {}
    for line in iter_docs(os.path.join(world, files_by_kind['Application'])):
        team = ((json.loads(line).get('metadata') or {}).get('labels') or {}).get('cp.ei.telekom.de/team')
        if team:
            t.setdefault(team, [0, 0, 0])[0] += 1
    for line in iter_docs(os.path.join(world, files_by_kind['Approval'])):
        lb = (json.loads(line).get('metadata') or {}).get('labels') or {}
        if lb.get('cp.ei.telekom.de/requester.team'):
            t.setdefault(lb['cp.ei.telekom.de/requester.team'], [0, 0, 0])[1] += 1
        if lb.get('cp.ei.telekom.de/decider.team'):
            t.setdefault(lb['cp.ei.telekom.de/decider.team'], [0, 0, 0])[2] += 1
    return sorted(t.items(), key=lambda kv: (-kv[1][0], -min(kv[1][1], kv[1][2]), -(kv[1][1] + kv[1][2]), kv[0]))


def pick_params(conn, team_name=None):
    team = conn.execute(
        'SELECT teams.name, (SELECT COUNT(*) FROM applications a WHERE a.team_applications = teams.id) '
        'FROM teams WHERE teams.name = %s', (team_name,)).fetchone()
    nsubs = conn.execute('SELECT COUNT(*) FROM api_subscriptions').fetchone()[0]
    pos = 10000 if nsubs >= 10050 else max(0, nsubs - 50)
    after = conn.execute('SELECT id FROM api_subscriptions ORDER BY id ASC OFFSET %s LIMIT 1',
                         (max(pos - 1, 0),)).fetchone()[0] if pos > 0 else 0
    app_id = conn.execute('SELECT a.id FROM applications a JOIN teams t ON t.id = a.team_applications '
                          'WHERE t.name = %s ORDER BY a.id LIMIT 1', (team[0],)).fetchone()[0]
    return {'team': team[0], 'team_applications': team[1],
            'api_subscriptions_total': nsubs, 'q2_after_position': pos, 'q2_after_id': after,
            'q4_application_id': app_id}


def connect(dsn, autocommit=True):
    return psycopg.connect(dsn, autocommit=autocommit)


def pg_ctl(args, cmd):
    return subprocess.run(args.pg_ctl_prefix + [os.path.join(args.pg_bin, 'pg_ctl')] + cmd,
                          check=True, capture_output=True, text=True)


def restart_timing(args, params):
    pg_ctl(args, ['-D', args.pgdata, '-m', 'fast', '-w', 'stop'])
    t0 = time.perf_counter()
    pg_ctl(args, ['-D', args.pgdata, '-l', args.pglog, '-W', 'start'])  # -W: return right after launching
    t_launch = time.perf_counter() - t0
    attempts = 0
    while True:
        attempts += 1
        try:
            c = psycopg.connect(args.dsn, autocommit=True, connect_timeout=2)
            c.execute('SELECT 1').fetchone()
            break
        except psycopg.OperationalError:
            if time.perf_counter() - t0 > 120:
                raise
            time.sleep(0.002)
    t_ready = time.perf_counter() - t0
    t1 = time.perf_counter_ns()
    shape = run_query(c, 'Q1', **params['Q1'])
    first_q1 = (time.perf_counter_ns() - t1) / 1e6
    c.close()
    return {'pg_ctl_start_returned_s': round(t_launch, 4), 'start_to_first_query_s': round(t_ready, 4),
            'connect_attempts': attempts, 'first_q1_after_restart_ms': round(first_q1, 3), 'first_q1_shape': shape,
            'note': 'clean shutdown (pg_ctl stop -m fast) then pg_ctl start; poll connect+SELECT 1 every 2 ms; '
                    'OS page cache stays warm'}


def fsync_probe(directory, n=200):
    """8 kB write + fdatasync, n times, on the data directory's file system (like pg_test_fsync's
    fdatasync line); the VM's flush latency varies a lot over time, so it is sampled around P1"""
    path = os.path.join(directory, 'fsync_probe.tmp')
    buf = os.urandom(8192)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o600)
    try:
        t0 = time.perf_counter()
        for _ in range(n):
            os.pwrite(fd, buf, 0)
            os.fdatasync(fd)
        el = time.perf_counter() - t0
    finally:
        os.close(fd)
        os.unlink(path)
    return {'fdatasync_ops_per_s': round(n / el, 1), 'usecs_per_op': round(el / n * 1e6, 1), 'n': n}


def du(path):
    total = 0
    for root, _, files in os.walk(path):
        for f in files:
            try:
                total += os.lstat(os.path.join(root, f)).st_size
            except OSError:
                pass
    return total


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument('--dsn', required=True)
    ap.add_argument('--world', required=True)
    ap.add_argument('--size', required=True, help='label: 10k, 100k, 1m, custom')
    ap.add_argument('--world-command', default='', help='the genworld command line (recorded)')
    ap.add_argument('--iterations', type=int, default=1000)
    ap.add_argument('--warmup', type=int, default=50)
    ap.add_argument('--txmode', choices=('reference', 'object'), default='reference',
                    help='reference: every statement auto-commits, Team in one transaction (as the reference); '
                         'object: one transaction per object')
    ap.add_argument('--workers', type=int, default=1,
                    help='P1 concurrent connections per kind (reference default MAX_CONCURRENT_RECONCILES=10 per '
                         'module); 1 = strictly sequential')
    ap.add_argument('--team', help='team (DB name group--team) for Q1/Q3/Q4; default as our benches choose')
    ap.add_argument('--schema', required=True)
    ap.add_argument('--fk-indexes', help='fk-indexes.sql: if given, P2 is repeated after adding FK indexes (tuned)')
    ap.add_argument('--pgdata', required=True)
    ap.add_argument('--pglog', required=True)
    ap.add_argument('--pg-bin', required=True)
    ap.add_argument('--pg-ctl-prefix', default='', help='e.g. "runuser -u postgres --" when running as root')
    ap.add_argument('--pg-settings', default='', help='settings passed to the server (recorded)')
    ap.add_argument('--fsync-test', help='pg_test_fsync output to embed in the result')
    ap.add_argument('--out', required=True)
    args = ap.parse_args()
    args.pg_ctl_prefix = args.pg_ctl_prefix.split() if args.pg_ctl_prefix else []

    with open(os.path.join(args.world, 'manifest.json')) as fh:
        manifest = json.load(fh)
    files_by_kind = {v['kind']: f for f, v in manifest['files'].items()}
    res = {'benchmark': 'postgres-baseline', 'size': args.size, 'world': os.path.abspath(args.world),
           'world_command': args.world_command, 'world_manifest': {
               'parameters': manifest.get('parameters'), 'seed': manifest.get('seed'),
               'environments': manifest.get('environments'), 'totalDocuments': manifest['totalDocuments'],
               'totalBytes': manifest['totalBytes'],
               'documents_per_kind': {v['kind']: v['documents'] for v in manifest['files'].values()}},
           'started_at': now().isoformat(), 'machine': {
               'uname': ' '.join(platform.uname()), 'cpus': os.cpu_count(), 'python': platform.python_version(),
               'psycopg': psycopg.__version__, 'psycopg_impl': psycopg.pq.__impl__,
               'loadavg_start': os.getloadavg()}}

    if args.fsync_test and os.path.exists(args.fsync_test):
        with open(args.fsync_test) as fh:
            txt = fh.read()
        res['pg_test_fsync'] = {'output': txt.splitlines(), 'fdatasync_ops_per_s': None}
        for ln in txt.splitlines():  # first fdatasync line = one 8kB write + flush
            if ln.strip().startswith('fdatasync'):
                try:
                    res['pg_test_fsync']['fdatasync_ops_per_s'] = float(ln.split()[1])
                except (IndexError, ValueError):
                    pass
                break
    conn = connect(args.dsn)
    res['postgres'] = {'version': conn.execute('SELECT version()').fetchone()[0],
                       'settings': {k: conn.execute('SHOW ' + k).fetchone()[0] for k in (
                           'fsync', 'synchronous_commit', 'full_page_writes', 'wal_level', 'shared_buffers',
                           'work_mem', 'max_wal_size', 'checkpoint_timeout', 'listen_addresses', 'port', 'jit')},
                       'server_args': args.pg_settings}
    with open(args.schema) as fh:
        conn.execute(fh.read())
    print('P1 load (%s, txmode=%s, workers=%d) ...' % (args.world, args.txmode, args.workers), flush=True)
    res['loadavg_before_p1'] = os.getloadavg()
    probe_dir = os.path.dirname(os.path.abspath(args.pgdata))
    res['fsync_probe_before_p1'] = fsync_probe(probe_dir)
    print('fsync probe before P1: %s' % res['fsync_probe_before_p1'], flush=True)
    res['p1'] = load_world(conn, args.world, files_by_kind, args.txmode, args.workers, args.dsn)
    res['loadavg_after_p1'] = os.getloadavg()
    res['fsync_probe_after_p1'] = fsync_probe(probe_dir)
    print('fsync probe after P1: %s' % res['fsync_probe_after_p1'], flush=True)
    print('P1: %d reference-kind documents in %.2f s = %.0f objects/s (%d written, %d statements, %d commits)' % (
        res['p1']['documents_processed_reference_kinds'], res['p1']['seconds_reference_kinds'],
        res['p1']['objects_per_s'], res['p1']['objects_written'], res['p1']['statements'], res['p1']['commits']),
        flush=True)
    res['table_rows'] = {t: conn.execute('SELECT COUNT(*) FROM "%s"' % t).fetchone()[0] for t in (
        'zones', 'groups', 'teams', 'members', 'applications', 'apis', 'api_exposures', 'api_subscriptions',
        'event_types', 'event_exposures', 'event_subscriptions', 'permission_sets', 'approvals', 'approval_requests')}

    # steady state: let statistics exist as autovacuum would eventually do
    conn.execute('VACUUM ANALYZE')
    if args.team:
        team_name, team_sel = args.team, 'given by --team'
    else:
        ranked = teams_by_load(args.world, files_by_kind)
        team_name = ranked[0][0]
        team_sel = ('most applications, then approvals on both sides (as benches/support teams_by_load): '
                    'apps/as requester/as decider = %s' % ranked[0][1])
    p = pick_params(conn, team_name)
    p['team_selection'] = team_sel
    res['p2_parameters'] = p
    params = {'Q1': {'team': p['team']}, 'Q2': {'team': None, 'after': p['q2_after_id']},
              'Q3': {'team': p['team']}, 'Q4': {'team': p['team'], 'app_id': p['q4_application_id']}}
    params['Q1_full'], params['Q2_full'], params['Q4_full'] = params['Q1'], params['Q2'], params['Q4']
    print('P2 (reference schema, team %s, %d iterations) ...' % (p['team'], args.iterations), flush=True)
    qc = connect(args.dsn)
    res['loadavg_before_p2'] = os.getloadavg()
    res['p2'] = measure(qc, params, args.iterations, args.warmup)
    qc.close()
    res['sql'] = SQL
    res['sql_full_variants'] = FULL_SQL
    res['graphql_equivalent'] = dict(GRAPHQL, **GRAPHQL_FULL)
    plans = {}
    for k, sql in (('Q1_count', SQL['Q1_count']), ('Q3_count', SQL['Q3_count'])):
        n = sql.count('%s')
        plans[k] = [r[0] for r in conn.execute('EXPLAIN ' + sql, (p['team'],) * n).fetchall()]
    res['plans_reference'] = plans

    # P4: sizes
    conn.execute('CHECKPOINT')
    dbsize = conn.execute('SELECT pg_database_size(current_database())').fetchone()[0]
    rel = conn.execute("SELECT COALESCE(SUM(pg_total_relation_size(c.oid)),0)::bigint FROM pg_class c JOIN pg_namespace n "
                       "ON n.oid = c.relnamespace WHERE n.nspname = 'public' AND c.relkind = 'r'").fetchone()[0]
    skipped_bytes = sum(v['bytes'] for v in manifest['files'].values() if v['kind'] in NO_TABLE)
    raw = manifest['totalBytes']
    res['p4'] = {'pg_database_size_bytes': dbsize, 'public_tables_total_bytes': rel,
                 'data_dir_bytes_incl_wal': du(args.pgdata), 'wal_dir_bytes': du(os.path.join(args.pgdata, 'pg_wal')),
                 'raw_manifest_bytes': raw, 'raw_bytes_reference_kinds': raw - skipped_bytes,
                 'db_size_over_raw': round(dbsize / raw, 3),
                 'db_size_over_raw_reference_kinds': round(dbsize / (raw - skipped_bytes), 3)}
    conn.close()
    print('P4 size: pg_database_size %d bytes = %.2f x raw manifest (%d bytes; %.2f x raw bytes of the kinds '
          'with tables)' % (dbsize, dbsize / raw, raw, res['p4']['db_size_over_raw_reference_kinds']), flush=True)
    res['p4']['restart'] = restart_timing(args, params)
    print('P4 restart: pg_ctl start -> first query %.3f s; first Q1 after restart %.2f ms' % (
        res['p4']['restart']['start_to_first_query_s'], res['p4']['restart']['first_q1_after_restart_ms']), flush=True)

    if args.fk_indexes:
        conn = connect(args.dsn)
        with open(args.fk_indexes) as fh:
            conn.execute(fh.read())
        plans = {}
        for k, sql in (('Q1_count', SQL['Q1_count']), ('Q3_count', SQL['Q3_count'])):
            n = sql.count('%s')
            plans[k] = [r[0] for r in conn.execute('EXPLAIN ' + sql, (p['team'],) * n).fetchall()]
        res['plans_tuned'] = plans
        conn.close()
        print('P2 tuned (NOT the reference: + FK indexes from fk-indexes.sql) ...', flush=True)
        qc = connect(args.dsn)
        res['p2_tuned_fk_indexes'] = measure(qc, params, args.iterations, args.warmup)
        qc.close()
    res['loadavg_end'] = os.getloadavg()
    res['finished_at'] = now().isoformat()
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    with open(args.out, 'w') as fh:
        json.dump(res, fh, indent=1, default=str)
        fh.write('\n')
    print()
    print('== PostgreSQL baseline %s (%d documents, %s) ==' % (args.size, manifest['totalDocuments'],
                                                               res['postgres']['version'].split(',')[0]))
    print('P1 load      %9.0f objects/s  (%d docs of %d reference kinds in %.1f s; %d docs of %d kinds without '
          'table skipped)' % (res['p1']['objects_per_s'], res['p1']['documents_processed_reference_kinds'],
                              len(HANDLERS), res['p1']['seconds_reference_kinds'],
                              res['p1']['documents_skipped_no_table'], len(NO_TABLE)))
    for q in QUERIES:
        line = 'P2 %-8s p50 %8.3f ms  p99 %8.3f ms' % (q, res['p2'][q]['p50_ms'], res['p2'][q]['p99_ms'])
        if 'p2_tuned_fk_indexes' in res:
            t = res['p2_tuned_fk_indexes'][q]
            line += '   | tuned (+FK idx) p50 %8.3f  p99 %8.3f' % (t['p50_ms'], t['p99_ms'])
        print(line)
    print('P4 disk      %d bytes (pg_database_size) = %.2f x raw %d' % (dbsize, dbsize / raw, raw))
    print('P4 restart   %.3f s pg_ctl start -> first query' % res['p4']['restart']['start_to_first_query_s'])
    print('load average start %s, end %s' % (res['machine']['loadavg_start'], res['loadavg_end']))
    print('result: %s' % args.out)


if __name__ == '__main__':
    main()
