/// `POST /start` reply.
struct StartResponse: Encodable {
    var id: String
    var started: Bool
}

/// One entry of `GET /list` (spec §2.2), plus `exit_signal` when a signal killed it.
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

    enum CodingKeys: String, CodingKey {
        case id, command, workdir, background, running
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
        exitCode = exit?.status.code
        exitSignal = exit?.status.signal
        startedAtUnix = process.startedAtUnix
        exitedAtUnix = exit?.exitedAtUnix
    }
}

struct ListResponse: Encodable {
    var processes: [ProcessInfoResponse]
}

/// `GET /{id}/output` reply (spec §2.3).
struct OutputResponse: Encodable {
    var output: String
    var truncated: OutputTruncation?
    var running: Bool
    var exitCode: Int?
    var exitSignal: String?
    var command: String

    enum CodingKeys: String, CodingKey {
        case output, truncated, running
        case exitCode = "exit_code"
        case exitSignal = "exit_signal"
        case command
    }

    init(_ process: ManagedProcess, _ snapshot: ManagedProcess.Snapshot) {
        // Invalid UTF-8 becomes U+FFFD, as Go's encoder does.
        output = String(decoding: snapshot.output, as: UTF8.self)
        truncated = snapshot.truncation
        running = snapshot.running
        exitCode = snapshot.exit?.code
        exitSignal = snapshot.exit?.signal
        command = process.command
    }
}

struct MessageResponse: Encodable {
    var message: String
}
