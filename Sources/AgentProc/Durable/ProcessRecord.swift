import AgentCore
import FoundationEssentials

#if canImport(Glibc)
import Glibc
#endif

/// A process as kept on disk beside its spool (`record.json`), so that an agent restart
/// finds it again: written at start and at exit. A record still without an exit after a
/// restart is a process whose end the agent could not see (`lost`).
struct ProcessRecord: Codable, Sendable, Equatable {
    struct Exit: Codable, Sendable, Equatable {
        var code: Int
        var signal: String?
        var exitedAtUnix: Int64

        enum CodingKeys: String, CodingKey {
            case code
            case signal
            case exitedAtUnix = "exited_at_unix"
        }
    }

    /// Record layout version.
    var version = 1
    var id: String
    var command: String
    var workdir: String
    var background: Bool
    var chatID: String?
    var startedAtUnix: Int64
    var options: StartOptions
    var exit: Exit?

    enum CodingKeys: String, CodingKey {
        case version, id, command, workdir, background
        case chatID = "chat_id"
        case startedAtUnix = "started_at_unix"
        case options
        case exit
    }

    static let fileName = "record.json"
    /// Largest record read back (a command is at most the HTTP body limit; bigger is not ours).
    static let maxFileBytes = 4 << 20

    init(_ process: ManagedProcess) {
        id = process.id
        command = process.command
        workdir = process.workdir
        background = process.background
        chatID = process.chatID
        startedAtUnix = process.startedAtUnix
        options = process.options
        if let exit = process.exitInfo, !process.lost {
            self.exit = Exit(code: exit.status.code, signal: exit.status.signal, exitedAtUnix: exit.exitedAtUnix)
        }
    }

    /// Writes the record into `directory` atomically (a temporary file renamed over it).
    func write(into directory: String) throws {
        let data = try JSONEncoder().encode(self)
        try AtomicFile.write(Array(data), to: directory + "/" + Self.fileName, mode: 0o600)
    }

    /// The record in `directory`, or nil if there is none or it cannot be read as one.
    static func read(from directory: String) -> ProcessRecord? {
        guard let bytes = AtomicFile.read(directory + "/" + fileName, maxBytes: maxFileBytes),
              let record = try? JSONDecoder().decode(ProcessRecord.self, from: Data(bytes)),
              record.version == 1
        else { return nil }
        return record
    }
}
