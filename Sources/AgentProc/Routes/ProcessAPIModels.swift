import AgentCore

/// `POST /start` reply; a retried tool call (``attached``) also says how its process is now.
struct StartResponse: Encodable {
    var id: String
    var started: Bool
    var attached: Bool?
    var running: Bool?
    var state: String?
    var exitCode: Int?
    var exitSignal: String?
    /// Set when the process runs but its record could not be written.
    var warning: String?

    enum CodingKeys: String, CodingKey {
        case id, started, attached, running, state, warning
        case exitCode = "exit_code"
        case exitSignal = "exit_signal"
    }

    init(id: String, started: Bool) {
        self.id = id
        self.started = started
    }

    /// A new process; a warning if its record could not be written.
    init(started process: ManagedProcess) {
        self.init(id: process.id, started: true)
        if let failure = process.recordFailure {
            warning = "The process runs, but its record could not be written (\(failure)): an agent restart will not know it."
        }
    }

    /// The answer to a retry: the first start's id and the process's current state (from
    /// the tool-call record when the process itself is no longer retained).
    init(attached id: String, process: ManagedProcess?, exit: ExitStatus?) {
        self.id = id
        started = true
        attached = true
        if let process {
            let info = ProcessInfoResponse(process)
            running = info.running
            state = info.state
            exitCode = info.exitCode
            exitSignal = info.exitSignal
        } else if let exit {
            running = false
            state = "exited"
            exitCode = exit.code
            exitSignal = exit.signal
        } else {
            // Claimed by an earlier agent that ended before it saw the process end.
            running = false
            state = "lost"
        }
    }
}

/// `POST /{id}/stdin` reply.
struct StdinResponse: Encodable {
    var written: Int
}

/// The line an await matched.
struct MatchResponse: Encodable {
    var line: String
    var offset: UInt64
}

/// `GET /{id}/output?offset=N&limit=M` reply: bytes from the spool by offset.
struct CursorResponse: Encodable {
    var output: String
    var nextOffset: UInt64
    var droppedBytes: UInt64
    var running: Bool
    var state: String
    var exitCode: Int?
    var exitSignal: String?

    enum CodingKeys: String, CodingKey {
        case output, running, state
        case nextOffset = "next_offset"
        case droppedBytes = "dropped_bytes"
        case exitCode = "exit_code"
        case exitSignal = "exit_signal"
    }

    /// State is read before the bytes, so `running: false` means nothing follows `next_offset`.
    init(_ process: ManagedProcess, read request: OutputQuery.CursorRead) {
        let info = ProcessInfoResponse(process)
        running = info.running
        state = info.state
        exitCode = info.exitCode
        exitSignal = info.exitSignal
        guard let spool = process.spool else {
            // Nothing printed yet (the spool is made with the first byte), or the disk refused
            // the spool: whatever was written is gone.
            output = ""
            nextOffset = process.outputEnd
            droppedBytes = process.outputEnd
            return
        }
        let read = spool.read(from: request.offset, limit: request.limit)
        // A character cut by the limit is left for the next read (both reads would show U+FFFD).
        var bytes = read.bytes[...]
        let whole = UTF8Boundary.completePrefix(bytes)
        if whole > 0, whole < bytes.count, read.offset + UInt64(bytes.count) < read.end { bytes = bytes.prefix(whole) }
        output = String(goDecoding: bytes)
        nextOffset = read.offset + UInt64(bytes.count)
        droppedBytes = read.dropped
    }
}

/// Where UTF-8 text may be cut.
enum UTF8Boundary {
    /// The length of the longest prefix of `bytes` that does not end inside a multi-byte
    /// character (only the last three bytes are looked at).
    static func completePrefix(_ bytes: ArraySlice<UInt8>) -> Int {
        var index = bytes.endIndex
        var looked = 0
        while index > bytes.startIndex, looked < 4 {
            index -= 1
            looked += 1
            let byte = bytes[index]
            if byte & 0xC0 == 0x80 { continue }  // a continuation byte: keep looking back
            let length = byte < 0x80 ? 1 : byte >= 0xF0 ? 4 : byte >= 0xE0 ? 3 : byte >= 0xC0 ? 2 : 1
            return index + length <= bytes.endIndex ? bytes.count : index - bytes.startIndex
        }
        return bytes.count
    }
}

/// One entry of `GET /list`, plus `exit_signal` when a signal killed it.
struct ProcessInfoResponse: Encodable {
    var id: String
    var command: String
    var workdir: String?
    var background: Bool
    var running: Bool
    var exitCode: Int?
    var exitSignal: String?
    var startedAtUnix: Int64
    var exitedAtUnix: Int64?
    /// `running`, `exited`, or `lost` (restored after an agent restart that did not see it end).
    var state: String
    var stdin: Bool?
    var pty: Bool?

    enum CodingKeys: String, CodingKey {
        case id, command, workdir, background, running, state, stdin, pty
        case exitCode = "exit_code"
        case exitSignal = "exit_signal"
        case startedAtUnix = "started_at_unix"
        case exitedAtUnix = "exited_at_unix"
    }

    init(_ process: ManagedProcess) {
        let exit = process.exitInfo
        id = process.id
        command = process.command
        workdir = process.workdir.isEmpty ? nil : process.workdir
        background = process.background
        running = exit == nil
        startedAtUnix = process.startedAtUnix
        if process.lost {
            state = "lost"
        } else {
            state = exit == nil ? "running" : "exited"
            exitCode = exit?.status.code
            exitSignal = exit?.status.signal
            exitedAtUnix = exit?.exitedAtUnix
        }
        if process.options.stdin { stdin = true }
        if process.options.terminal != nil { pty = true }
    }
}

struct ListResponse: Encodable {
    var processes: [ProcessInfoResponse]
}

/// `GET /{id}/output` reply.
struct OutputResponse: Encodable {
    var output: String
    var truncated: OutputTruncation?
    var running: Bool
    var exitCode: Int?
    var exitSignal: String?
    var command: String
    /// `running`, `exited` or `lost`.
    var state: String
    /// Which condition ended an await (only then).
    var condition: String?
    var match: MatchResponse?

    enum CodingKeys: String, CodingKey {
        case output, truncated, running
        case exitCode = "exit_code"
        case exitSignal = "exit_signal"
        case command, state, condition, match
    }

    init(_ process: ManagedProcess, _ snapshot: ManagedProcess.Snapshot) {
        // Each invalid UTF-8 byte becomes U+FFFD, as Go's encoder writes it.
        output = String(goDecoding: snapshot.output)
        truncated = snapshot.truncation
        running = snapshot.running
        command = process.command
        if process.lost {
            state = "lost"
        } else {
            state = snapshot.running ? "running" : "exited"
            exitCode = snapshot.exit?.code
            exitSignal = snapshot.exit?.signal
        }
    }
}

struct MessageResponse: Encodable {
    var message: String
}

/// `GET /status` reply.
struct StatusResponse: Encodable {
    struct Spool: Encodable {
        var enabled: Bool
        /// Why not, when spooling is off.
        var reason: String?
    }

    struct DurableWrites: Encodable {
        var failures: Int
        var lastFailure: LastFailure?

        enum CodingKeys: String, CodingKey {
            case failures
            case lastFailure = "last_failure"
        }
    }

    struct LastFailure: Encodable {
        var file: String
        var error: String
        var atUnix: Int64

        enum CodingKeys: String, CodingKey {
            case file, error
            case atUnix = "at_unix"
        }
    }

    var spool: Spool
    var durableWrites: DurableWrites

    enum CodingKeys: String, CodingKey {
        case spool
        case durableWrites = "durable_writes"
    }

    init(_ manager: ProcessManager) {
        let reason: String? =
            if !manager.configuration.spoolOutput {
                "off (--proc-spool false)"
            } else {
                manager.spoolUnavailable.map { "disabled: \($0)" }
            }
        spool = Spool(enabled: manager.spooling, reason: reason)
        let last = manager.failures.last
        durableWrites = DurableWrites(
            failures: manager.failures.count,
            lastFailure: last.map { LastFailure(file: $0.file.rawValue, error: $0.error, atUnix: $0.atUnix) })
    }
}
