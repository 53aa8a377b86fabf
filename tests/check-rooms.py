#!/usr/bin/env python3
"""The layering test: every room uses only what rooms.txt lets it use.

    check-rooms.py SRCDIR [ROOM=LIBRARY ...]

    check-rooms.py --self-test

Reads the table SRCDIR/rooms.txt (a room, then the rooms it may use; it
may also use whatever those may use; "!ROOM" names a room it may not use
even where a room it uses would let it, directly or transitively) and
checks:

- the table: each room is a folder; it lists only rooms above it in the
  file, so the rooms form no circle; every folder holding C files under
  a room is a room itself (a new folder gets its line in the table);
- includes: each #include "name.h" of a room's files names a header of
  the same room or of one it may use, and of none it may not; header
  names are unique, so each name has one room.  An include from above or
  from beside, or into a room marked "!", fails, naming the file, the
  line and the header;
- docs/HACKING.md: its layout table has a row for each room whose "may
  use" column names the rooms rooms.txt lists (and, after "not", the
  rooms it may not use);
- calls (for each ROOM=LIBRARY given, the room's static library): each
  symbol a room's object file leaves undefined is defined in the same
  room, in a room it may use and not one it may not, or outside every
  room (libc, OpenSSL...); and within a room, no two files call each
  other, directly or round a circle, except in the rooms marked
  "cycles-ok".

--self-test runs these checks on small trees of its own and fails unless
they refuse what they must (an include and a call into a room marked "!",
even one a room below lets through).

Exit status 0 when all holds, 1 with one line per problem otherwise.
"""
import collections
import os
import re
import subprocess
import sys

INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"')
SOURCE_EXT = ('.c', '.h')


def fail(problems, msg):
    problems.append(msg)


def read_table(srcdir, problems, forbid=None):
    """rooms.txt -> (ordered list of rooms, {room: direct uses}, {room: flags});
    forbid (a dict, if given) gets {room: rooms it may not use}."""
    order, uses, flags = [], {}, {}
    forbid = {} if forbid is None else forbid
    path = os.path.join(srcdir, 'rooms.txt')
    with open(path, encoding='utf-8') as f:
        for n, line in enumerate(f, 1):
            words = line.split('#')[0].split()
            if not words:
                continue
            room, rest = words[0], [w for w in words[1:] if w != '-']
            flags[room] = {w for w in rest if w.endswith('-ok')}
            forbid[room] = {w[1:] for w in rest if w.startswith('!')}
            deps = [w for w in rest if w not in flags[room] and not w.startswith('!')]
            for d in sorted(forbid[room]):
                if d not in uses:
                    fail(problems, f'rooms.txt:{n}: {room} may not use {d}, which is not a room listed above it')
                elif d in deps:
                    fail(problems, f'rooms.txt:{n}: {room} both may and may not use {d}')
            if room in uses:
                fail(problems, f'rooms.txt:{n}: {room} is listed twice')
            if not os.path.isdir(os.path.join(srcdir, room)):
                fail(problems, f'rooms.txt:{n}: {room} is not a folder')
            for d in deps:
                if d not in uses:
                    fail(problems, f'rooms.txt:{n}: {room} may use {d}, which is not a room listed above it '
                                   '(a room uses only rooms below it: no circles)')
            order.append(room)
            uses[room] = [d for d in deps if d in uses]
    return order, uses, flags


def closure(order, uses):
    """{room: every room it may use, directly or through another}."""
    below = {}
    for room in order:
        s = set()
        for d in uses[room]:
            s.add(d)
            s |= below[d]
        below[room] = s
    return below


def room_files(srcdir, order, problems):
    """{room: [path relative to srcdir]} of the .c/.h files directly in each
    room's folder; a folder with C files under a room must be a room."""
    rooms = set(order)
    files = {r: [] for r in order}
    tops = {r.split('/')[0] for r in order}
    for top in sorted(tops):
        for dirpath, dirnames, filenames in os.walk(os.path.join(srcdir, top)):
            dirnames.sort()
            rel = os.path.relpath(dirpath, srcdir)
            cs = sorted(f for f in filenames if f.endswith(SOURCE_EXT))
            if not cs:
                continue
            if rel not in rooms:
                fail(problems, f'{rel}/ holds C files but is no room: give it a line in rooms.txt')
                continue
            files[rel] = [f'{rel}/{f}' for f in cs]
    return files


def header_rooms(files, problems):
    """{header name: room}; names must be unique across the rooms."""
    where = {}
    for room, paths in files.items():
        for p in paths:
            name = os.path.basename(p)
            if not name.endswith('.h'):
                continue
            if name in where:
                fail(problems, f'{p}: the header name {name} is also {where[name][1]}: '
                               'header names are unique (includes name them without a folder)')
            else:
                where[name] = (room, p)
    return {name: room for name, (room, _) in where.items()}


def check_doc(srcdir, uses, forbid, problems):
    """docs/HACKING.md's rows | `room/` | holds | `a`, `b`; not `c` | say what rooms.txt says."""
    path = 'docs/HACKING.md'
    seen = set()
    with open(os.path.join(srcdir, path), encoding='utf-8') as f:
        for n, line in enumerate(f, 1):
            cells = [c.strip() for c in line.strip().strip('|').split('|')]
            m = re.fullmatch(r'`([a-z/]+)/`', cells[0]) if len(cells) == 3 else None
            if not m or m.group(1) not in uses:
                continue
            room = m.group(1)
            seen.add(room)
            may, _, may_not = cells[2].partition('not ')
            said = set(re.findall(r'`([a-z/]+)`', may))
            said_not = set(re.findall(r'`([a-z/]+)`', may_not))
            if said != set(uses[room]):
                fail(problems, f'{path}:{n}: {room} may use {", ".join(sorted(said)) or "nothing"} there, but '
                               f'{", ".join(uses[room]) or "nothing"} in rooms.txt')
            if said_not != forbid.get(room, set()):
                fail(problems, f'{path}:{n}: {room} may not use {", ".join(sorted(said_not)) or "nothing named"} '
                               f'there, but {", ".join(sorted(forbid.get(room, ()))) or "nothing named"} in rooms.txt')
    for room in uses:
        if room not in seen:
            fail(problems, f'{path}: the layout table has no row for the room {room}/')


def relation(src, dst, below):
    return 'upward' if src in below[dst] else 'sideways'


def check_includes(srcdir, files, headers, below, forbid, problems):
    for room, paths in files.items():
        for p in paths:
            with open(os.path.join(srcdir, p), encoding='utf-8', errors='replace') as f:
                for n, line in enumerate(f, 1):
                    m = INCLUDE.match(line)
                    if not m:
                        continue
                    name = m.group(1)
                    if '/' in name:
                        fail(problems, f'{p}:{n}: #include "{name}": name a header without its folder; '
                                       'the room\'s include directories find it')
                        continue
                    if name not in headers:
                        fail(problems, f'{p}:{n}: #include "{name}": no room holds {name}')
                        continue
                    to = headers[name]
                    if to in forbid.get(room, ()):
                        fail(problems, f'{p}:{n}: #include "{name}" reaches into {to}, which rooms.txt says '
                                       f'{room} may not use (!{to})')
                    elif to != room and to not in below[room]:
                        fail(problems, f'{p}:{n}: #include "{name}" reaches {relation(room, to, below)} '
                                       f'from {room} into {to}, which rooms.txt does not let {room} use')


def nm(lib, *opts):
    """[(object file, type, symbol)] of a static library."""
    out = subprocess.run(['nm', '-A', '-g', *opts, lib], check=True, capture_output=True, text=True).stdout
    rows = []
    for line in out.splitlines():  # LIBRARY:MEMBER:[ADDRESS] TYPE SYMBOL
        head, _, rest = line.rpartition(':')
        member = head.split(':', 1)[-1]
        parts = rest.split()
        if len(parts) < 2:
            continue
        rows.append((os.path.basename(member), parts[-2], parts[-1]))
    return rows


def source_of(room, member):
    """ca.c.o -> service/ca/ca.c"""
    return f'{room}/{member[:-2] if member.endswith(".o") else member}'


def check_calls(libs, below, flags, forbid, problems):
    defined = {}  # symbol -> [(room, source)]
    undefined = []  # (room, source, symbol)
    for room, lib in libs.items():
        for member, typ, sym in nm(lib, '--defined-only'):
            if typ in 'TDBRVWCGSui':
                defined.setdefault(sym, []).append((room, source_of(room, member)))
        for member, typ, sym in nm(lib, '--undefined-only'):
            undefined.append((room, source_of(room, member), sym))
    edges = collections.defaultdict(lambda: collections.defaultdict(set))  # room -> src -> {(dst, sym)}
    for room, src, sym in undefined:
        homes = defined.get(sym, [])
        same = [s for r, s in homes if r == room]
        barred = [(r, s) for r, s in homes if r in forbid.get(room, ())]
        if barred:
            fail(problems, f'{src} calls {sym}() of {barred[0][1]}: into {barred[0][0]}, which rooms.txt says '
                           f'{room} may not use (!{barred[0][0]})')
        elif same:
            for s in same:
                if s != src:
                    edges[room][src].add((s, sym))
        elif homes and not any(r in below[room] for r, _ in homes):
            to_room, to_src = homes[0]
            fail(problems, f'{src} calls {sym}() of {to_src}: {relation(room, to_room, below)} from {room} '
                           f'into {to_room}, which rooms.txt does not let {room} use')
    for room in libs:
        if 'cycles-ok' in flags.get(room, ()):
            continue
        for circle in circles(edges[room]):
            fail(problems, f'{room}: these files call each other, round a circle: {circle}')


def circles(graph):
    """Each strongly connected set of files, as 'a.c -> b.c (sym) -> a.c'."""
    index, low, stack, on, out = {}, {}, [], set(), []
    nodes = sorted(set(graph) | {d for es in graph.values() for d, _ in es})

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w, _ in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            scc = []
            while True:
                w = stack.pop()
                on.discard(w)
                scc.append(w)
                if w == v:
                    break
            if len(scc) > 1:
                names = ', '.join(sorted(os.path.basename(f) for f in scc))
                out.append(f'{names}; e.g. {describe(graph, set(scc))}')

    for v in nodes:
        if v not in index:
            visit(v)
    return out


def describe(graph, scc):
    """One circle through the set, with a symbol on each step."""
    start = min(scc)
    path, seen, v = [start], {start}, start
    while True:
        step = sorted((d, s) for d, s in graph.get(v, ()) if d in scc)
        nxt = next(((d, s) for d, s in step if d == start and len(path) > 1), None) or \
            next(((d, s) for d, s in step if d not in seen), None) or step[0]
        path.append(f'{os.path.basename(nxt[0])} ({nxt[1]})')
        if nxt[0] in seen:
            return ' -> '.join([os.path.basename(path[0])] + path[1:])
        seen.add(nxt[0])
        v = nxt[0]


def main(argv):
    if len(argv) < 2:
        print(__doc__, file=sys.stderr)
        return 2
    srcdir = argv[1]
    libs = dict(a.split('=', 1) for a in argv[2:])
    if argv[1] == '--self-test':
        return self_test()
    problems, n_rooms, n_files = check(srcdir, libs)
    for p in problems:
        print(p)
    print(f'check-rooms: {n_rooms} rooms, {n_files} files, {len(libs)} libraries: '
          f'{len(problems)} problem(s)')
    return 1 if problems else 0


def check(srcdir, libs):
    """Every check; -> (problems, rooms, files)."""
    problems, forbid = [], {}
    order, uses, flags = read_table(srcdir, problems, forbid)
    below = closure(order, uses)
    for room in libs:
        if room not in uses:
            fail(problems, f'{room}: a library was given for it, but rooms.txt has no such room')
    files = room_files(srcdir, order, problems)
    headers = header_rooms(files, problems)
    check_includes(srcdir, files, headers, below, forbid, problems)
    check_doc(srcdir, uses, forbid, problems)
    check_calls({r: l for r, l in libs.items() if r in uses}, below, flags, forbid, problems)
    return problems, len(order), sum(len(v) for v in files.values())


# ---- self-test: small trees the checks must refuse ----

FIXTURE_TABLE = """common         -
policy         common
service/http   common
service/store  service/http
service/ca     service/store policy{ca_mark}
service/api    service/ca{api_mark}
"""

FIXTURE_DOC = """| room | holds | may use |
|---|---|---|
| `common/` | x | — |
| `policy/` | x | `common` |
| `service/http/` | x | `common` |
| `service/store/` | x | `service/http` |
| `service/ca/` | x | `service/store`, `policy`{ca_doc} |
| `service/api/` | x | `service/ca`{api_doc} |
"""

# room -> {file: text}: a header each, and the calls between them.
FIXTURE_FILES = {
    'common': {'common.h': 'int common_fn(void);\n', 'common.c': '#include "common.h"\nint common_fn(void) { return 0; }\n'},
    'policy': {'policy.h': 'int policy_decide(void);\n',
               'policy.c': '#include "policy.h"\nint policy_decide(void) { return 1; }\n'},
    'service/http': {'http.h': 'int http_respond(void);\n',
                     'http.c': '#include "http.h"\nint http_respond(void) { return 2; }\n'},
    'service/store': {'store.h': 'int store_get(void);\n',
                      'store.c': '#include "store.h"\n#include "http.h"\nint store_get(void) { return http_respond(); }\n'},
    'service/ca': {'ca.h': 'int ca_call(void);\n',
                   'ca.c': '#include "ca.h"\n#include "policy.h"\n#include "store.h"\n'
                           'int ca_call(void) { return store_get() + policy_decide(); }\n'},
    'service/api': {'api.c': '#include "ca.h"\nint api_handle(void) { return ca_call(); }\n'},
}


def fixture(top, marks=True, extra=None, compile_libs=False):
    """Writes a fixture tree under top (extra: {path: text} added to it);
    -> {room: library} when compile_libs."""
    import shutil
    shutil.rmtree(top, ignore_errors=True)
    fill = {'ca_mark': ' !service/http' if marks else '', 'api_mark': ' !policy' if marks else '',
            'ca_doc': '; not `service/http`' if marks else '', 'api_doc': '; not `policy`' if marks else ''}
    os.makedirs(os.path.join(top, 'docs'))
    with open(os.path.join(top, 'rooms.txt'), 'w') as f:
        f.write(FIXTURE_TABLE.format(**fill))
    with open(os.path.join(top, 'docs', 'HACKING.md'), 'w') as f:
        f.write(FIXTURE_DOC.format(**fill))
    files = {f'{room}/{name}': text for room, fs in FIXTURE_FILES.items() for name, text in fs.items()}
    files.update(extra or {})
    for path, text in files.items():
        os.makedirs(os.path.dirname(os.path.join(top, path)), exist_ok=True)
        with open(os.path.join(top, path), 'w') as f:
            f.write(text)
    return compile_rooms(top) if compile_libs else {}


def compile_rooms(top):
    libs = {}
    for room in FIXTURE_FILES:
        objs = []
        for name in sorted(os.listdir(os.path.join(top, room))):
            if not name.endswith('.c'):
                continue
            obj = os.path.join(top, room, name + '.o')
            inc = [f'-I{os.path.join(top, r)}' for r in FIXTURE_FILES]
            subprocess.run([os.environ.get('CC', 'cc'), '-c', '-o', obj, os.path.join(top, room, name)] + inc,
                           check=True)
            objs.append(obj)
        libs[room] = os.path.join(top, room, 'lib.a')
        subprocess.run(['ar', 'rcs', libs[room]] + objs, check=True)
    return libs


def expect(name, problems, want):
    """want: None for no problem, else a text every problem line must hold one of."""
    if want is None and not problems:
        return 0
    if want is not None and any(all(w in p for w in want) for p in problems):
        return 0
    print(f'self-test {name}: expected {"no problem" if want is None else want}, got {problems or "none"}')
    return 1


def self_test():
    import tempfile
    bad = 0
    with tempfile.TemporaryDirectory(prefix='check-rooms-') as top:
        # The tree as it is: nothing to say, includes and calls alike.
        bad += expect('clean', check(top, fixture(top, compile_libs=True))[0], None)
        # service/ca includes the transport's header: refused by the mark,
        # though the store below it lets it through ...
        extra = {'service/ca/bad.c': '#include "http.h"\nint ca_bad(void) { return http_respond(); }\n'}
        libs = fixture(top, extra=extra, compile_libs=True)
        problems = check(top, libs)[0]
        bad += expect('ca -> http include', problems, ['service/ca/bad.c:1', 'http.h', 'may not use'])
        bad += expect('ca -> http call', problems, ['http_respond()', 'may not use'])
        # ... and without the mark, the table alone would have allowed it.
        bad += expect('ca -> http without the mark', check(top, fixture(top, marks=False, extra=extra))[0], None)
        # service/api uses policy directly: an include and a call.
        extra = {'service/api/bad.c': '#include "policy.h"\nint api_bad(void) { return policy_decide(); }\n'}
        problems = check(top, fixture(top, extra=extra, compile_libs=True))[0]
        bad += expect('api -> policy include', problems, ['service/api/bad.c:1', 'policy.h', 'may not use'])
        bad += expect('api -> policy call', problems, ['policy_decide()', 'may not use'])
    print(f'check-rooms --self-test: {"failed" if bad else "ok"}')
    return 1 if bad else 0


if __name__ == '__main__':
    sys.exit(main(sys.argv))
