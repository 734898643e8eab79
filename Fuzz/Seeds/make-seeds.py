#!/usr/bin/env python3
"""Writes the small seed corpus of every fuzz target (Fuzz/Seeds/<target>/), in each
target's input layout (Fuzz/Targets/Support/FuzzInput.swift): a few well-formed cases,
so that even a short `make fuzz-smoke` run starts past the first parse errors.
Run from anywhere: python3 Fuzz/Seeds/make-seeds.py"""
import os
import struct

HERE = os.path.dirname(os.path.abspath(__file__))


def u(n, width):
    return n.to_bytes(width, "little")


def data(b, max_length=255):
    """FuzzInput.data(maxLength:): a 1- or 2-byte length, then the bytes."""
    return u(len(b), 2 if max_length > 255 else 1) + b


def chunks(n=24, size=0xFF):
    """Trailing chunk sizes: FuzzInput.chunks reads one byte per chunk."""
    return bytes([size]) * n


def varint(n):
    out = bytearray()
    while n >= 0x80:
        out.append(n & 0x7F | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def pb_string(field, text):
    b = text.encode()
    return bytes([field << 3 | 2]) + varint(len(b)) + b


def drpc(kind, stream, message, payload=b"", done=True):
    return bytes([kind << 1 | (1 if done else 0)]) + varint(stream) + varint(message) + varint(len(payload)) + payload


def call(stream, method, request):
    return (drpc(1, stream, 1, method.encode()) + drpc(2, stream, 2, request) + drpc(6, stream, 3))


def yamux(type_, flags, stream, length, payload=b""):
    return bytes([0, type_]) + struct.pack(">HII", flags, stream, length) + payload


def write(target, name, content):
    folder = os.path.join(HERE, target)
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, name), "wb") as f:
        f.write(content)


S = "/coder.agentsocket.v1.AgentSocket/"

# FuzzEditMatcher: replace_all, search, replacement (2-byte lengths), then the file.
write("FuzzEditMatcher", "exact", b"\x00" + data(b"b = 2", 600) + data(b"b = 3", 600) + b"a = 1\nb = 2\nc = 3\n")
write("FuzzEditMatcher", "fuzzy-indent", b"\x00" + data(b"if x:\n  y()\n", 600) + data(b"if x:\n  z()\n", 600)
      + b"def f():\n    if x:   \n        y()\n    return\n")
write("FuzzEditMatcher", "crlf-all", b"\x01" + data(b"a\n", 600) + data(b"b\n", 600) + b"a\r\nx\r\na\r\n")

# FuzzFileRequests: 0 read-file-lines, 1 read-file, 2 edit-files, 3 tool-call headers, 4 clean.
write("FuzzFileRequests", "lines", b"\x00" + data(b"path=/a&offset=2&limit=2&max_line_bytes=4", 300) + b"one\ntwo\nthree-long\nfour\n")
write("FuzzFileRequests", "lines-budget", b"\x00" + data(b"path=/a&max_response_bytes=5&max_response_lines=1", 300) + b"x\ny\n")
write("FuzzFileRequests", "read-file", b"\x01" + b"path=/etc/hosts&offset=3&limit=10")
write("FuzzFileRequests", "edit-files", b"\x02" + b'{"include_diff":true,"files":[{"path":"/a","expected_sha256":"'
      + b"AB" * 32 + b'","edits":[{"old_text":"x","new_text":"y","replace_all":true},{"search":"s","replace":"r"}]}]}')
write("FuzzFileRequests", "tool-call", b"\x03\x04" + b"\x04\x01" + b"\x00" + data(b"7") + b"\x01" + data(b"call%201")
      + b"\x02" + data(b"1500"))
write("FuzzFileRequests", "clean", b"\x04" + b"/a/./b/../../c//d/")

# FuzzFilePathText: any bytes.
write("FuzzFilePathText", "latin1", b"caf\xe9/\xf4\x8f\xbc\x80-ok")

# FuzzJSONRequest: 0 chat headers, else a body.
write("FuzzJSONRequest", "start", b"\x01" + b'{"command":"echo \\"hi\\" \\u00e9","env":{"A":"1","B":null},"background":true,"Command":"x"}')
write("FuzzJSONRequest", "nested", b"\x01" + b'[1.5e3,-0,{"a":[true,false,null,"\\ud83d\\ude00"]}]')
write("FuzzJSONRequest", "chat", b"\x00" + data(b"{6F1C1F7E-7A0B-4A43-9C53-1D2E3F405162}")
      + b'["urn:uuid:6f1c1f7e-7a0b-4a43-9c53-1d2e3f405163", "bad"]')

# FuzzProcessStart: 0 start body, 1 id, 2 head/tail.
write("FuzzProcessStart", "start", b"\x00" + b'{"command":"ls -la","workdir":"/tmp","env":{"Z":"1","A":"x=y"}}')
write("FuzzProcessStart", "id", b"\x01" + b"proc%2D1%41")
# Head 8, tail 8, lines of 34, 3 writes (a byte before each once the head is full: 1, no skip).
write("FuzzProcessStart", "headtail", b"\x02\x08\x08\x11\x03" + data(b"hello world\n" * 3, 200) + b"\x01"
      + data(b"x" * 40, 200) + b"\x01" + data(b"\nend", 200))

# FuzzDesktopAction: native width, height (2 bytes each), a coordinate (8), a size (2), then JSON.
native = u(1920, 2) + u(1080, 2) + u(5000, 8) + u(1280, 2)
write("FuzzDesktopAction", "click", native + b'{"action":"left_click","coordinate":[100,200],"scaled_width":1280,"scaled_height":720}')
write("FuzzDesktopAction", "region", native + b'{"action":"screenshot","region":[10,10,300,200],"settle_ms":50}')
write("FuzzDesktopAction", "key", native + b'{"action":"hold_key","text":"CTRL+Shift+F5","duration":20}')
write("FuzzDesktopAction", "scroll", native + b'{"action":"scroll","coordinate":[5],"scroll_direction":"left","scroll_amount":-3}')

# FuzzBoundaryFrames: 0 sequence numbers, else a stream of frames then chunk sizes.
log = bytes([1 << 3 | 0, 1]) + bytes([3 << 3 | 2]) + varint(len(pb_string(1, "GET") + pb_string(2, "http://x/"))) \
    + pb_string(1, "GET") + pb_string(2, "http://x/")
request = bytes([1 << 3 | 2]) + varint(len(log)) + log + pb_string(2, "session-1")
v2 = bytes([1 << 3 | 2]) + varint(len(request)) + request
write("FuzzBoundaryFrames", "v1-v2", b"\x01" + bytes([1]) + len(request).to_bytes(3, "big") + request
      + bytes([2]) + len(v2).to_bytes(3, "big") + v2 + chunks(16, 7))
write("FuzzBoundaryFrames", "bad-tag", b"\x01" + bytes([1, 0, 0, 0]) + bytes([9, 0, 0, 1, 0]) + chunks(4))
write("FuzzBoundaryFrames", "sequences", b"\x00" + u(2147483646, 4) + b"\x05" + u(1, 4) + u(3, 4) + u(3, 4) + u(2, 4))

# FuzzAgentProto: the type's index, then the bytes; 255: `$` expansion.
write("FuzzAgentProto", "report-boundary-logs", bytes([15]) + request)
write("FuzzAgentProto", "sync-want", bytes([23]) + pb_string(1, "a") + pb_string(2, "b"))
write("FuzzAgentProto", "manifest", bytes([5]) + b"")
write("FuzzAgentProto", "expand", b"\xff" + b"~/x/${A}/$B_1/$/${}/$EMPTY$Z")

# FuzzDRPCFrames: default limit, a unary call, then chunk sizes.
write("FuzzDRPCFrames", "call", b"\x01" + call(1, S + "Ping", b"") + drpc(3, 2, 1, b"\x00" * 7 + b"\x0cno") + chunks(8, 3))

# FuzzDERPFrames: default limit, seal-as-disco flag, a stream of frames (or a disco
# payload), then 64 chunk sizes.
def derp(type_, payload):
    return bytes([type_]) + struct.pack(">I", len(payload)) + payload


key = bytes(range(32))
frames = (derp(1, b"DERP\xf0\x9f\x94\x91" + key) + derp(3, bytes(24) + bytes(29)) + derp(5, key + bytes(100))
          + derp(6, b"") + derp(0x12, bytes(range(8))) + derp(0x14, b"duplicate") + derp(0x15, struct.pack(">II", 100, 2000))
          + derp(8, key + b"\x00") + derp(0x7e, b"xyz"))
write("FuzzDERPFrames", "frames", b"\x01\x00" + frames + chunks(64, 7))
write("FuzzDERPFrames", "huge-header", b"\x01\x00" + derp(6, b"") + b"\x05\x00\x20\x00\x00" + bytes(190) + chunks(64, 5))
write("FuzzDERPFrames", "disco-ping", b"\x01\x01" + b"\x01\x01" + bytes(range(12)) + key + bytes(1230 - 44) + chunks(64, 40))
write("FuzzDERPFrames", "disco-pong", b"\x01\x00" + b"\x02\x01" + bytes(12) + bytes(10) + b"\xff\xff\x7f\x03\x03\x28\x03\xe7"
      + bytes(1230 - 30) + chunks(64, 40))
write("FuzzDERPFrames", "server-info-json", b"\x01\x00" + b'{"version":2,"TokenBucketBytesPerSecond":10,"TokenBucketBytesBurst":20}'
      + bytes(130) + chunks(64, 9))

# FuzzAgentSocket: calls on successive streams, then chunk sizes.
sync = (call(1, S + "Ping", b"") + call(2, S + "SyncWant", pb_string(1, "b") + pb_string(2, "a"))
        + call(3, S + "SyncStart", pb_string(1, "a")) + call(4, S + "SyncStatus", pb_string(1, "b"))
        + call(5, S + "SyncComplete", pb_string(1, "a")) + call(6, S + "SyncList", b"")
        + call(7, S + "SyncReady", pb_string(1, "b")) + call(8, "/nope/Nope", b""))
write("FuzzAgentSocket", "sync", sync + chunks(8, 40))
write("FuzzAgentSocket", "wait-ready", call(1, S + "SyncWant", pb_string(1, "b") + pb_string(2, "a"))
      + call(2, S + "SyncWaitReady", pb_string(1, "b")) + call(3, S + "SyncComplete", pb_string(1, "a")) + chunks(4))

# FuzzYamuxSession: 0 decoder only; else role, small limits or not, then operations.
# An operation is a stream byte then an opcode byte (see `operation` in the target).
ops = b"\x00\x07"  # open
ops += b"\x00\x03" + b"\x01\x02" + b"\x01\x01" + u(0, 4)  # a WindowUpdate with ACK on stream 1
ops += b"\x00\x08" + data(b"hello", 600)  # write
ops += b"\x00\x03" + b"\x00\x01" + b"\x00\x00" + data(b"peer data", 300)  # a Data frame with SYN, the peer's first stream
ops += b"\x00\x0e\x01"  # accept
ops += b"\x00\x09"  # read
ops += b"\x00\x0f"  # ping
ops += b"\x00\x11" + u(100, 2)  # sweep
write("FuzzYamuxSession", "session", b"\x01\x01\x00" + ops)
write("FuzzYamuxSession", "decode", b"\x00" + u(1000, 2) + yamux(0, 1, 1, 3, b"abc") + yamux(2, 1, 0, 7) + chunks(4, 5))

# FuzzWebSocketClient: 0 masking; else raw server bytes (then chunk sizes) or built frames.
frames = yamux(1, 1, 2, 0) + yamux(0, 0, 2, 2, b"hi") + yamux(2, 1, 0, 9)
ws = bytes([0x82, len(frames)]) + frames + bytes([0x89, 0x02]) + b"pi" + bytes([0x88, 0x02, 0x03, 0xE8])
write("FuzzWebSocketClient", "server-raw", b"\x01\x01" + ws + chunks(8, 9))
write("FuzzWebSocketClient", "masking", b"\x00" + b"\x37\xfa\x21\x3d" + b"0123456789abcdef!")

# FuzzHTTPGuard: 0 mask check; else client bytes, then chunk sizes.
write("FuzzHTTPGuard", "pipelined", b"\x01" + b"GET /a HTTP/1.1\r\nHost: x\r\n\r\n"
      b"POST /b HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\n\r\nabc"
      b"POST /c HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nhi\r\n0\r\n\r\n" + chunks(8, 30))
write("FuzzHTTPGuard", "expect", b"\x01" + b"POST /e HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\nContent-Length: 2\r\n\r\nok" + chunks(2))
write("FuzzHTTPGuard", "upgrade", b"\x01" + b"GET /ws HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
      b"Sec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n" + chunks(2))
write("FuzzHTTPGuard", "masked", b"\x00" + bytes([0x81, 0x85, 1, 2, 3, 4]) + bytes(b ^ (i % 4 + 1) for i, b in enumerate(b"hello"))
      + bytes([0x82, 0xFE, 0x00, 0x02, 0, 0, 0, 0, 9, 9]) + chunks(4, 3))

# FuzzTunnelStack: packets; each a kind byte (0 raw, 1 ICMPv6, else TCP) and its fields (see
# `packet` in the target): peer, destination, ports, sequence and acknowledgment offsets,
# flags, options, payload, window, checksum choice. A handshake to port 4, data, FIN, echo.
def tcp(seq, ack, flags_index, payload=b"", syn_options=False):
    p = b"\x02\x00\x01\x00" + b"\x00\x00" + u(seq, 2) + u(ack, 1) + b"\x00" + bytes([flags_index]) + data(b"")
    if syn_options:
        p += b"\x01"
    return p + data(payload, 1200) + b"\xff\xff\x01"


tunnel = tcp(0, 0, 0, syn_options=True) + tcp(1, 9, 1) + tcp(1, 9, 2, b"hello") + tcp(6, 9, 3)
write("FuzzTunnelStack", "handshake-data-fin", tunnel)
write("FuzzTunnelStack", "echo", b"\x01\x00\x01\x01\x01" + data(b"ping", 64) + tcp(0, 0, 0))

# FuzzCron: 0 (even: the zone's index times 2) a spec, or 1 a TZif file; a 5-byte start
# (2023-11-14 here, 1.7e9 s); then the spec or the file. The TZif seeds are the system's
# zone files (written when /usr/share/zoneinfo has them; the committed ones otherwise).
start = u(3_700_000_000, 5)
for name, zone, spec in [("every-second", 0, "* * * * * *"), ("five-fields", 1, "*/5 * * * *"),
                         ("six-fields", 2, "0 30 2 * * MON-FRI"), ("names", 3, "0 0 9 1,15 JAN-MAR ?"),
                         ("tz-prefix", 4, "CRON_TZ=America/New_York 0 30 2 * * *"), ("every", 5, "@every 1h30m"),
                         ("descriptor", 6, "@weekly"), ("steps", 7, "5/20 10-50/7 */3 */2 */4 1-5")]:
    write("FuzzCron", "spec-" + name, bytes([zone << 1]) + start + spec.encode())
for zone in ["UTC", "America/New_York", "Australia/Lord_Howe"]:
    path = os.path.join("/usr/share/zoneinfo", zone)
    if os.path.isfile(path):
        with open(path, "rb") as f:
            write("FuzzCron", "tzif-" + zone.replace("/", "-"), b"\x01" + start + f.read())

# FuzzScriptLogs: 0 lines: a 2-byte bound (0xFFFF: the default), the stream (2-byte length),
# the largest chunk, chunk sizes; 1 a record; 2 the journal (see `fuzzJournal` in the target).
write("FuzzScriptLogs", "lines-crlf", b"\x00" + u(16, 2) + data(b"one\r\ntwo\rthree\n\nlong line that goes past sixteen bytes\r\n"
      + "❌❌❌❌xx\n".encode() + b"tail\r", 4096) + b"\x07" + bytes([3, 1, 6, 2, 5, 4, 0, 6] * 4))
write("FuzzScriptLogs", "lines-invalid", b"\x00" + u(0xFFFF, 2) + data(b"ok\x00\xff\xfe\xc0\xafA\xed\xa0\x80\xf4\x90\x80\x80"
      b"\xe2\x82\n\xf0\x9f\x98\x80\n\x00\x00x\xc3", 4096) + b"\x03" + bytes([0, 1, 2] * 10))
record = b"\x01\x03" + u(1_700_000_000_123_456_789, 8) + bytes(range(16))
write("FuzzScriptLogs", "record", b"\x01" + record + "hello ❌ world".encode())
write("FuzzScriptLogs", "record-invalid", b"\x01" + record + b"bad \xc0\xaf")


def journal_frame(payload):
    return u(len(payload), 4) + u(crc32c(payload), 4) + payload


def crc32c(b):
    crc = 0xFFFFFFFF
    for byte in b:
        crc ^= byte
        for _ in range(8):
            crc = 0x82F63B78 ^ (crc >> 1) if crc & 1 else crc >> 1
    return crc ^ 0xFFFFFFFF


def journal_ops():
    return (b"\x00\x02\x0a\x01"  # peek 2 records / 40 bytes, acknowledge 1
            + b"\x02" + data(b"appended", 300)  # append
            + b"\x04"  # reopen
            + b"\x03\x00\x00"  # an old batch again
            + b"\x01\x05\xff\x07")  # peek 5 / 1020 bytes, acknowledge all


records = [b"first", b"second record", b""]
# Built frames (flags 15: data, cursor, built header and frames, built cursor), capacity
# 4000, generation 1, a torn tail, the cursor (generation 1) after the first record.
built = b"\x01" + bytes([len(records)]) + b"".join(data(r, 300) for r in records) + data(b"\x05\x00\x00\x00\x01")
write("FuzzScriptLogs", "journal-frames", b"\x02\x0f\x00" + u(4000, 2) + built + b"\x01" + u(16 + 8 + 5, 2) + journal_ops())
# The cursor of another generation: everything is pending.
write("FuzzScriptLogs", "journal-stale-cursor", b"\x02\x0f\x00" + u(100, 2) + built + b"\x02" + u(16 + 8 + 5, 2) + journal_ops())
# Raw files (flags 3): a header and frames, the second one's checksum wrong; a short cursor.
raw = b"CJN1" + bytes(4) + u(0, 8) + journal_frame(b"kept") + u(3, 4) + u(0, 4) + b"bad" + journal_frame(b"lost")
write("FuzzScriptLogs", "journal-raw", b"\x02\x03\x01" + data(raw, 2048) + data(b"CJC1\x00\x00") + journal_ops())

# FuzzProcessAwait: 0 an `until=` pattern, a NUL, a line (LineRegexFuzzing); 1 an output
# query string; 2 a literal (up to 4 bytes), a chunk count, chunks (up to 40 bytes), how
# many chunks are read back before the live part.
write("FuzzProcessAwait", "regex-server-up", b"\x00" + rb"^(ready|listening)[: ]+\w+ on :\d{2,5}$" + b"\x00" + b"listening: server on :8080")
write("FuzzProcessAwait", "regex-classes", b"\x00" + rb"(?i)[[:alpha:]]+\s*\[y/N\]\s*$|\pL+\b" + b"\x00" + "Continuer? [Y/n] ".encode())
write("FuzzProcessAwait", "regex-nested", b"\x00" + rb"((a|b)*c){2,5}(?:x+x+)+y" + b"\x00" + b"abcabcxxxxy")
write("FuzzProcessAwait", "query", b"\x01" + b"until=%5Eready&from=3&timeout=2m&port=8080")
write("FuzzProcessAwait", "query-cursor", b"\x01" + b"offset=1024&limit=65536")
write("FuzzProcessAwait", "watch-split", b"\x02" + data(b"up", 4) + b"\x04" + data(b"boot\nready: serv", 40)
      + data(b"er u", 40) + data(b"p\r\nrest\n", 40) + data(b"", 40) + b"\x01")
# 3: a state directory: segment size, read limit, dropped and length (2 bytes each), a
# valid cursor (not 0 mod 4), segments (a name kind, a 2-byte start, bytes), the records log.
seg = lambda start, body: b"\x01" + u(start, 2) + data(body, 96)
write("FuzzProcessAwait", "restore-two-segments", b"\x03" + bytes([15, 7]) + u(3, 2) + u(29, 2) + b"\x01" + b"\x02"
      + seg(0, b"0123456789abcdef") + seg(16, b"ghijklmnopqrstuv")
      + b'{"t":"start","record":{"version":1,"id":"f0","command":"seq 1 9","workdir":"/","background":false,"started_at_unix":1700000000,"options":{"stdin":false}}}\n'
      + b'{"t":"exit","id":"f0","exit":{"code":0,"exited_at_unix":1700000001}}\n{"t":"st')
write("FuzzProcessAwait", "restore-extreme-times", b"\x03" + bytes([15, 7]) + u(0, 2) + u(0, 2) + b"\x01" + b"\x00"
      + b'{"t":"start","record":{"version":1,"id":"f1","command":"x","workdir":"","background":false,"started_at_unix":-9223372036854775808,"options":{"stdin":false}}}\n'
      + b'{"t":"exit","id":"f1","exit":{"code":-9223372036854775808,"exited_at_unix":9223372036854775807}}\n')

# FuzzMCPFrames: the 16 MiB limit, a server's answers to initialize, tools/list and
# tools/call (text, image, an error result), a notification and a ping, then chunk sizes.
mcp = (b'{"jsonrpc":"2.0","id":1,"result":{"protocolVersion":"2025-11-25","capabilities":{"tools":{"listChanged":true}},'
       b'"serverInfo":{"name":"s","version":"1"}}}\n'
       b'{"jsonrpc":"2.0","id":2,"result":{"tools":[{"name":"echo","inputSchema":{"type":"object"}}],"nextCursor":"2"}}\r\n'
       b'{"jsonrpc":"2.0","id":3,"result":{"content":[{"type":"text","text":"hi"},{"type":"image","data":"iVBO","mimeType":"image/png"},'
       b'{"type":"resource_link","uri":"file:///x"}],"isError":true}}\n'
       b'{"jsonrpc":"2.0","method":"notifications/tools/list_changed"}\n\n'
       b'{"jsonrpc":"2.0","id":"p","method":"ping"}\n'
       b'{"jsonrpc":"2.0","id":4,"error":{"code":-32601,"message":"Method not found"}}\n')
write("FuzzMCPFrames", "session", b"\x01" + mcp + chunks(64, 9))
write("FuzzMCPFrames", "small-limit", b"\x00\x40\x00" + mcp + chunks(64, 5))
# The same target reads its stream as an HTTP event stream too: an endpoint event, messages
# over CRLF and CR lines, a comment, an id, multi-line data and an unfinished event.
sse = (b': keep-alive\r\nevent: endpoint\r\ndata: /messages/?session_id=1\r\n\r\n'
       b'id: 7\nevent: message\ndata: {"jsonrpc":"2.0","id":1,"result":{}}\n\n'
       b'data: {"jsonrpc":"2.0",\rdata: "method":"notifications/tools/list_changed"}\r\r'
       b'retry: 1000\ndata\n\ndata: {"unfinished"')
write("FuzzMCPFrames", "event-stream", b"\x01" + sse + chunks(64, 7))

# FuzzMCPConfig: mode byte (0 expansion, 1 a generated document, 2-3 raw JSON), then the case.
mcp_config = (b'{"mcpServers":{"github":{"type":"http","url":"https://api.example/mcp?key=v",'
              b'"headers":{"Authorization":"Bearer t0ken"}},'
              b'"files":{"command":"npx","args":["-y","@scope/server","--root=/w"],"env":{"TOKEN":"$TOKEN","H":"${HOME}/x","D":"$$"}},'
              b'"bad__name":{"command":"x"},"_lead":{"url":"u"},"empty":{},"notobj":[1],"typed":{"command":7,"Args":"no"},'
              b'"Files":{"COMMAND":"sh","Command":"bash"}},"other":true}')
write("FuzzMCPConfig", "servers", b"\x02" + mcp_config)
write("FuzzMCPConfig", "not-an-object", b"\x02" + b'{"mcpServers":[1,2]}')
write("FuzzMCPConfig", "generated", b"\x01" + bytes([9]) + bytes(range(7, 200)))
write("FuzzMCPConfig", "expansion", b"\x00" + bytes([15]) + bytes([2, 3, 0x61, 0x62, 0x63, 0, 3, 2, 0x7b, 0x41, 4, 5, 1, 6, 3, 0, 2, 0x78, 0x24, 1])
      + b"plain text")

# FuzzFrontMatter: mode byte (even: raw SKILL.md text; odd: a name and description written
# into front matter and read back), then the case.
skill = (b'\xef\xbb\xbf---\r\nname: "my-skill"\r\ndescription: >-\r\n  Does a thing\r\n\r\n  well # not a comment\r\n'
         b'metadata:\r\n  owner: me\r\n  tags: [a, b]\r\nother: \'it\'\'s\'\r\n---\r\n# Body <!-- hidden -->\r\n\xe2\x80\x8bText\r\n')
write("FuzzFrontMatter", "skill", b"\x00" + skill)
write("FuzzFrontMatter", "escapes", b"\x00" + b'---\nname: x\ndescription: "tab\\there \\u00e9 \\U0001F600 \\x41"\nlist:\n  - a\n---\nbody\n')
write("FuzzFrontMatter", "round-trip", b"\x01" + bytes([1, 0, 1, 0x0f, 12]) + "na\u00efve \"skill\"\n".encode()
      + bytes([30]) + b"line one\nline two # x\nthree" + bytes([2, 0, 1, 1, 3]) + b"Body\n")

# FuzzTLSHandler: a server flag byte (bit 0), the split byte, then the peer's bytes. A real
# ClientHello and a server's first flight (Python's ssl over memory buffers, the target's own
# fuzz.invalid certificate; captured once, so that the seeds do not change at every run).
TLS_CLIENT_HELLO = bytes.fromhex(
    "1603010200010001fc03031c7f16c7dfe7e3dfc4ce04a620a0a0bb49a7f1065767dec06632e9732b976b03205c50c572"
    "bd2074550655b6b978fd2cb345e0d7fe44f93054622ce526edaa8f9c0024130213031301c02cc030c02bc02fcca9cca8"
    "c024c028c023c027009f009e006b006700ff0100018f00000011000f00000c66757a7a2e696e76616c6964000b000403"
    "000102000a00160014001d0017001e0019001801000101010201030104002300000010000b000908687474702f312e31"
    "0016000000170000000d002a0028040305030603080708080809080a080b080408050806040105010601030303010302"
    "040205020602002b00050403040303002d00020101003300260024001d00203ea5bb603001449bdec06417d73973d137"
    "37ec016aec3c245bb078f7365d5f5e001500d20000000000000000000000000000000000000000000000000000000000"
    "000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000"
    "000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000"
    "000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000"
    "00000000000000000000000000000000000000000000000000000000000000000000000000"
)
TLS_SERVER_FLIGHT = bytes.fromhex(
    "160303007a02000076030333e2049f8b1adc11c313e47d11f967d13032792c6d61bf62985ceb14336bcb23205c50c572"
    "bd2074550655b6b978fd2cb345e0d7fe44f93054622ce526edaa8f9c130200002e002b0002030400330024001d002038"
    "a6bff461a972e5da3d6cad20990ac139e5f25c1c4b598989f018cd75c5355c1403030001011703030017d033942dd381"
    "45691adb83bf49360079ad3b1aaa2ce21a17030301c1178369d2ec2aeb372815584b2a4dd267e2dc6beeec335d1004e0"
    "45b20d20d86038ce8e4074b7ac49f17395a864b6cc5ae291edd0fc67e163a05456787a445270e82e8cfe2af6ceb5ef2a"
    "8ba6d98d2c662a5f6bdb37c7769cd0e7dff7436144461810dfa9a2c8d18c8eaf136affc72c485534d3415610d60ddd38"
    "baefc36c3813605b7be2bb1e019409a7cd4dc4ed5305615f2417c3a6cfa29a8e0e077a6602edbfc796578ffe5b3556be"
    "bd451a7b584a626f12315ce53fa61429e4bda6ff543752e119cebe310471b56c29d6beea291f877e941c2aee633ca743"
    "9467cd9d0ea672e062122e2e86b66149d497bb01bf2484b7cfd7114f834e92659f36a50a7d5e3d03d0cbcac385f945ec"
    "43f62f7e265d589cb7d0801acc4d33ec85245ed273201b84639c98cd92082daf74a3d480a6d3964392c6a2e77c36aba0"
    "fb76dc042d1ad98856a749021ab781f2130072143bd7dc648359155096a6a87be65dfcea741bf950ed7ebc80dc594f26"
    "c360104129cbf422e9209ef3362003cf358c8ee59784f1d434da21acd4e7300f938d3ebc2eb0e275c2c59e6f7d827380"
    "89cc65d4eec04b1074a2bd402edbf18e7135ae18812360e20e3d623e20193fad257c0fe24221a6170303006051a3ff82"
    "d9082450e709a951403e377573b7dfecc9b180b9e8393593298f3ffbc71e4f53e68ca24a274abbc0a907498615649108"
    "c442a20d0fdc7758617e81a7ff49e4ab9013e775874144c789f849117902ae2fda07758a2ac28880119c902817030300"
    "45ab7dd6ef0cfa5ce4dcc9359346300876ff8fc4f9496e3a8a494f0455702a914b0904e07965f3e7afa7af3bee362b72"
    "cb0cd014649792e70f4f7605e5ada04a2babbd91f75f"
)
write("FuzzTLSHandler", "server-client-hello", b"\x01\xff" + TLS_CLIENT_HELLO)
write("FuzzTLSHandler", "server-client-hello-split", b"\x01\x05" + TLS_CLIENT_HELLO)
write("FuzzTLSHandler", "server-truncated-hello", b"\x01\xff" + TLS_CLIENT_HELLO[:100])
write("FuzzTLSHandler", "server-plain-http", b"\x01\xff" + b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
write("FuzzTLSHandler", "client-server-flight", b"\x00\x07" + TLS_SERVER_FLIGHT)
write("FuzzTLSHandler", "client-alert", b"\x00\xff" + bytes.fromhex("15030300020228"))
write("FuzzTLSHandler", "client-oversized-record", b"\x00\xff" + bytes.fromhex("16030340ff") + bytes(64))

# FuzzSpeedtestRequest: the request's raw bytes.
write("FuzzSpeedtestRequest", "download", b'{"version":2,"time":5000000000,"direction":0}\n')
write("FuzzSpeedtestRequest", "upload", b'{"Version":2,"TIME":1000,"direction":1,"x":["}",{"y":"\\""}]}\nrest')
write("FuzzSpeedtestRequest", "mismatch", b'{"version":1,"time":"5s"}')

# FuzzReconnectingPTY: a byte choosing the split, then a connection's bytes (init frame, input objects).
def pty_frame(d):
    import json
    b = json.dumps(d).encode()
    return struct.pack("<H", len(b)) + b
write("FuzzReconnectingPTY", "attach", b"\x03" + pty_frame({"ID": "7d1c2b6e-0000-4000-8000-000000000001", "Height": 24, "Width": 80, "Command": "",
      "Container": "", "ContainerUser": "", "BackendType": ""}) + b'{"data":"ls\\r"}{"height":40,"width":120}\n{"data":"a}\\"{"}')
write("FuzzReconnectingPTY", "folded", b"\x01" + pty_frame({"id": "x", "HEIGHT": 1, "width": 2, "command": "top"}) + b' {"DATA":"\\u00e9"} [1]')
write("FuzzReconnectingPTY", "partial", b"\x05\x20\x00{\"ID\":\"abc\"")

# FuzzCgroupValues: separator byte, field index (2 bytes), prefix (1-byte length), then the file.
write("FuzzCgroupValues", "cpu-max", b" " + u(1, 2) + data(b"usage_usec") + b"max 100000\n")
write("FuzzCgroupValues", "memory-stat", b" " + u(0, 2) + data(b"inactive_file")
      + b"anon 4096\ninactive_anon 0\ninactive_file 8192\nactive_file 1\n")
write("FuzzCgroupValues", "unlimited", b"\n" + u(0, 2) + data(b"total_inactive_file") + b"9223372036854771712\n")

# FuzzProcCgroup: the file.
write("FuzzProcCgroup", "v2", b"0::/user.slice/user-1000.slice/session-2.scope\n")
write("FuzzProcCgroup", "hybrid", b"12:memory:/docker/abc\n11:cpu,cpuacct:/docker/abc\n0::/docker/abc\n")
write("FuzzProcCgroup", "cpuinfo", b"processor\t: 0\nmodel name\t: x\n\nprocessor\t: 1\n")

# FuzzProcMeminfo and FuzzProcStat: the file.
write("FuzzProcMeminfo", "meminfo", b"MemTotal:       16316412 kB\nMemFree:         1048576 kB\nMemAvailable:    8158206 kB\n"
      b"Buffers:          100 kB\nCached:          2000 kB\nHugePages_Total:       0\n")
write("FuzzProcMeminfo", "old-kernel", b"MemTotal: 1000 kB\nMemFree: 10 kB\nBuffers: 5 kB\nCached: 20 kB\n")
write("FuzzProcStat", "stat", b"cpu  4705 356 584 3699176 23060 0 277 0 0 0\ncpu0 1393 280 331 924154 7228 0 160 0 0 0\n"
      b"intr 1462898 12 3 0\nctxt 2452640\nbtime 1700000000\nprocesses 17300\nprocs_running 1\nprocs_blocked 0\n"
      b"softirq 1101238 0 286510 9 92519 0 0 1197 0 0 721003\n")
write("FuzzProcStat", "old-kernel", b"cpu 1 2 3 4\ncpu0 1 2 3 4\n")

# FuzzCgroupTree: v2 flag, then for each file a present flag and its bytes (1-byte length), then meminfo.
v2_files = [b"0::/a/b\n", b"max 100000\n", b"usage_usec 1000\n", b"max\n", b"4096\n", b"inactive_file 10\n",
            b"200000 100000\n", b"1073741824\n", b"8192\n"]
write("FuzzCgroupTree", "v2", b"\x01" + b"".join(b"\x01" + data(f) for f in v2_files)
      + b"\x01" + data(b"MemTotal: 100 kB\nMemAvailable: 40 kB\n"))
v1_files = [b"1000000000\n", b"100000\n", b"-1\n", b"9223372036854771712\n", b"4096\n", b"total_inactive_file 1\n"]
write("FuzzCgroupTree", "v1", b"\x00" + b"".join(b"\x01" + data(f) for f in v1_files) + b"\x00")

# FuzzDirectPaths: a STUN response, an endpoint text, then steps (a kind byte, then its
# fields): the peer's endpoints, a send, a sealed Ping from 10.0.0.2:5000, WireGuard from
# the same source, time, a sealed CallMeMaybe over DERP, the block switch, a send.
stun_tx = bytes(range(12))
xor_mapped = bytes([0, 1]) + (32853 ^ 0x2112).to_bytes(2, "big") + bytes(a ^ b for a, b in zip([192, 0, 2, 1], [0x21, 0x12, 0xA4, 0x42]))
stun_response = bytes([1, 1, 0, 12, 0x21, 0x12, 0xA4, 0x42]) + stun_tx + bytes([0, 0x20, 0, 8]) + xor_mapped
disco_ping = bytes([1, 1]) + bytes(range(12))
wireguard = bytes([4, 0, 0, 0]) + bytes(28)
call_me_maybe = bytes([3, 0]) + bytes(10) + b"\xff\xff" + bytes([10, 0, 0, 2]) + (5000).to_bytes(2, "big")
steps = (b"\x05\x01" + u(0x0A05, 2) + b"\x02"
         + b"\x00" + data(disco_ping) + b"\x02" + u(5000, 2) + b"\x01"
         + b"\x00" + data(wireguard) + b"\x02" + u(5000, 2) + b"\x00"
         + b"\x03" + u(3000, 2)
         + b"\x01" + data(call_me_maybe) + b"\x01"
         + b"\x04\x01\x02")
write("FuzzDirectPaths", "ping-then-wireguard", data(stun_response, 200) + data(b"10.0.0.2:5000", 64) + steps)
write("FuzzDirectPaths", "garbage", data(b"\x00\x01\x00\x00\x21\x12\xa4\x42" + bytes(12), 200) + data(b"[::1]:1", 64)
      + b"\x00" + data(bytes([0x54, 0x53, 0xF0, 0x9F, 0x92, 0xAC]) + bytes(60)) + b"\x01" + u(1, 2) + b"\x00")

# FuzzOutboundProxy: pick (even: a proxy's answer to CONNECT, 1 mod 3: the proxy variables,
# 2 mod 3: a SOCKS5 proxy's answers), a split byte (chunk size; for SOCKS5 its top bit gives
# the client credentials), then the bytes.
write("FuzzOutboundProxy", "established", b"\x00\x07HTTP/1.1 200 Connection established\r\n\r\nSSH-2.0")
write("FuzzOutboundProxy", "refused",
      b"\x00\x03HTTP/1.0 407 Proxy Authentication Required\r\nProxy-Authenticate: Basic realm=\"x\"\r\n\r\n")
write("FuzzOutboundProxy", "environment",
      b"\x01\x05http://user:pw@proxy:3128\nproxy.example\nexample.com, .corp, 10.0.0.0/8, [::2]:443, *.w.io\nwww.corp")
write("FuzzOutboundProxy", "socks-anonymous", b"\x02\x05" + bytes([5, 0]) + bytes([5, 0, 0, 1, 10, 0, 0, 1, 0x10, 0x92]) + b"target")
write("FuzzOutboundProxy", "socks-credentials", b"\x02\x83" + bytes([5, 2, 1, 0]) + bytes([5, 0, 0, 3, 4]) + b"host" + bytes([0, 0x50]))

# FuzzInstanceIdentity: the cloud (google, aws, azure), an agent name (a flag, then a 1-byte
# length), each metadata answer (a flag for 200, else a 2-byte status offset from 100; a
# 2-byte length and the body), then coderd's answer (a flag for 200, else 401; the rest).
def answer(body, status=200):
    head = b"\x01" if status == 200 else b"\x00" + u(status - 100, 2)
    return head + data(body, 1024)


write("FuzzInstanceIdentity", "google", b"\x00\x01" + data(b"dev", 16) + answer(b"eyJhbGciOiJSUzI1NiJ9.e30.sig")
      + b"\x01" + b'{"session_token":"abc"}')
write("FuzzInstanceIdentity", "aws", b"\x01\x00" + answer(b"AQAEAtoken==") + answer(b"SIGNATURE")
      + answer(b'{"instanceId":"i-0123","region":"us-east-1"}') + b"\x01" + b'{"session_token":"t"}')
write("FuzzInstanceIdentity", "aws-imdsv1", b"\x01\x00" + answer(b"<html>not found</html>", 404) + answer(b"SIG")
      + answer(b"DOC") + b"\x00" + b'{"message":"Unauthorized."}')
write("FuzzInstanceIdentity", "azure", b"\x02\x00" + answer(b'{"encoding":"pkcs7","signature":"MIIB"}')
      + b"\x01" + b'{"session_token":"az"}')
write("FuzzInstanceIdentity", "aws-token-line-break", b"\x01\x00" + answer(b"T\r\nHost: elsewhere") + answer(b"SIG")
      + answer(b"DOC") + b"\x01" + b'{"session_token":"t"}')

# FuzzDERPUpgrade: WebSocket (a flag), close after (a flag), the split byte, then the relay's
# answer ({accept} in a WebSocket head stands for the right Sec-WebSocket-Accept).
derp_frame = bytes([2]) + (5).to_bytes(4, "big") + b"hello"
write("FuzzDERPUpgrade", "derp-101", b"\x00\x01\x07" + b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: DERP\r\nConnection: Upgrade\r\n\r\n"
      + derp_frame)
write("FuzzDERPUpgrade", "websocket-101", b"\x01\x01\x05" + b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n"
      + b"Connection: Upgrade\r\nSec-WebSocket-Accept: {accept}\r\nSec-WebSocket-Protocol: derp\r\n\r\n"
      + bytes([0x82, len(derp_frame)]) + derp_frame + bytes([0x89, 2]) + b"hi")
write("FuzzDERPUpgrade", "refused", b"\x00\x01\x03" + b"HTTP/1.1 426 Upgrade Required\r\nContent-Length: 12\r\n\r\nuse websocketTRAILING")
write("FuzzDERPUpgrade", "refused-unbounded", b"\x00\x01\x11" + b"HTTP/1.1 502 Bad Gateway\r\n\r\n" + b"x" * 5000)
write("FuzzDERPUpgrade", "long-head", b"\x00\x00\xff" + b"HTTP/1.1 101 OK\r\nX-Pad: " + b"p" * 17000 + b"\r\n\r\n" + derp_frame)
write("FuzzDERPUpgrade", "not-http", b"\x00\x01\x02" + b"SSH-2.0-OpenSSH_9.2\r\n\r\n")

# FuzzSSHSession, an AES-GCM packet (0xF0: sealed by the target; 0xF1: taken as sealed):
# padding length, payload (SSH_MSG_IGNORE with a string), padding to a whole block.
ignore = bytes([2]) + (5).to_bytes(4, "big") + b"hello"
pad = 16 - (len(ignore) + 1) % 16
pad = pad + 16 if pad < 4 else pad
write("FuzzSSHSession", "aes-gcm-ignore", b"\xf0" + bytes([pad]) + ignore + bytes(pad))
write("FuzzSSHSession", "aes-gcm-short-padding", b"\xf0" + bytes([2]) + ignore + bytes(16 - (len(ignore) + 1) % 16))
write("FuzzSSHSession", "aes-gcm-forged", b"\xf1" + (32).to_bytes(4, "big") + bytes(48))

# FuzzScriptLogs, the upload's request (0xF0): the count of records (mod 8, plus one), then
# each: a byte (0 mod 8: bytes that are no record, a 1-byte length), or the source (mod 2),
# the level, the time (8 bytes, little-endian, two's complement) and the text (a 1-byte length).
def line(source, level, ns, text):
    return bytes([1, source, level]) + (ns % (1 << 64)).to_bytes(8, "little") + data(text)


write("FuzzScriptLogs", "request", b"\xf0\x02" + line(0, 1, 1_700_000_000_123_456_789, b"starting")
      + line(0, 3, -1, b"before 1970") + line(1, 2, 0, b"other source"))
write("FuzzScriptLogs", "request-not-a-record", b"\xf0\x01" + b"\x00" + data(b"\x01short") + line(0, 1, 5, b"x"))

# FuzzRouteTrie: the patterns (count mod 8, plus one; each a component count mod 5, then
# components from a, b, c, :x, :y, {z}, a, {}), then the path: a byte (0 mod 4: the rest as
# raw text), its component count (mod 6) and components from a, b, c, d, "", x.
def pattern(*indices):
    return bytes([len(indices)]) + bytes(indices)


write("FuzzRouteTrie", "literal-over-capture", b"\x02" + pattern(0, 3, 1) + pattern(0, 1, 1) + pattern(0, 5)
      + b"\x01\x03" + bytes([0, 1, 1]))
write("FuzzRouteTrie", "fallback-to-capture", b"\x02" + pattern(0, 1, 2) + pattern(0, 3, 0) + pattern(2)
      + b"\x01\x03" + bytes([0, 1, 0]))
write("FuzzRouteTrie", "first-component-once", b"\x01" + pattern(0, 1) + pattern(3, 2) + b"\x01\x02" + bytes([0, 2]))
write("FuzzRouteTrie", "raw-path", b"\x01" + pattern(3, 6) + pattern() + b"\x00" + b"//a%2F/\xff\xfe/b//")
# Found by a deeper replay: a reserved opcode, then a frame in the same read (forwarded only
# when the reads put it there, before the adapter stopped reading after its close).
write("FuzzDERPUpgrade", "frames-after-a-bad-opcode", b"\x01\x01\x05" + b"HTTP/1.1 101 Switching Protocols\r\n"
      + b"Upgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: {accept}\r\n\r\n"
      + bytes([0x82, 3]) + b"abc" + bytes([0x8B, 0]) + bytes([0x00, 5]) + b"hello" + bytes([0x89, 2]) + b"hi")
write("FuzzDERPUpgrade", "101-without-reason", b"\x00\x01\x04" + b"HTTP/1.1 101\r\n\r\n" + derp_frame)
