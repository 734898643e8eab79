import FoundationEssentials
import ServiceLifecycle

#if canImport(Glibc)
import Glibc
#endif

/// Keeps ``ChatPaths`` across restarts (beyond the reference, which loses a chat's watched
/// repositories when the agent restarts): restored when the service starts, saved a second
/// after changes and once more at shutdown.
///
/// The file is JSON (`{"version":1,"chats":[{"id","paths":[...]}]}`), written atomically
/// (a temporary file, fsync, rename) with mode 0600, and at most ``maxFileBytes`` (the chats
/// touched longest ago are left out first). A missing file starts empty; a torn, corrupt or
/// oversized one is reported through `log` and ignored, never fatal.
public final class ChatPathsJournal: Service, Sendable {
    public static let maxFileBytes = 8 << 20
    /// Changes are saved at most this often.
    public static let saveDelay: Duration = .seconds(1)

    public let paths: ChatPaths
    public let file: String
    private let log: @Sendable (String) -> Void

    public init(paths: ChatPaths, file: String, log: @escaping @Sendable (String) -> Void = { _ in }) {
        self.paths = paths
        self.file = file
        self.log = log
    }

    public func run() async throws {
        restore()
        await cancelWhenGracefulShutdown {
            while !Task.isCancelled {
                await self.paths.changes.wait()
                if Task.isCancelled { break }
                try? await Task.sleep(for: Self.saveDelay)
                self.save()
            }
        }
        save()
    }

    /// Records what the file holds (chats in the order they were saved).
    @discardableResult
    public func restore() -> Int {
        var info = stat()
        guard stat(file, &info) == 0 else { return 0 }
        guard info.st_size <= Self.maxFileBytes else {
            log("chat paths file \(file) is larger than \(Self.maxFileBytes) bytes; ignored")
            return 0
        }
        guard let data = FileManager.default.contents(atPath: file),
            let root = try? JSONValue.parseFirst(data),
            root["version"]?.intValue == 1, let chats = root["chats"]?.arrayValue
        else {
            log("chat paths file \(file) is unreadable or corrupt; starting without it")
            return 0
        }
        var restored = 0
        for chat in chats {
            guard let id = chat["id"]?.stringValue, let list = chat["paths"]?.arrayValue?.compactMap(\.stringValue) else { continue }
            for path in list where path.hasPrefix("/") && !path.utf8.contains(0) {
                paths.record(path, chat: id)
                restored += 1
            }
        }
        return restored
    }

    /// Writes the store now.
    public func save() {
        var chats = paths.snapshot()
        var bytes = Self.encode(chats)
        while bytes.count > Self.maxFileBytes, !chats.isEmpty {
            chats.removeFirst(max(1, chats.count / 10))
            bytes = Self.encode(chats)
        }
        do {
            try Self.writeAtomically(bytes, to: file)
        } catch {
            log("cannot save chat paths to \(file): \(error)")
        }
    }

    private struct File: Encodable {
        struct Chat: Encodable {
            let id: String
            let paths: [String]
        }
        let version = 1
        let chats: [Chat]
    }

    static func encode(_ chats: [(chat: String, paths: [String])]) -> Data {
        let file = File(chats: chats.map { File.Chat(id: $0.chat, paths: $0.paths) })
        return (try? JSONEncoder().encode(file)) ?? Data()
    }

    /// A temporary file beside the target, written and synced, then renamed over it
    /// (``AtomicFile``), and the directory synced.
    static func writeAtomically(_ data: Data, to path: String) throws {
        let directory = parentDirectory(of: path)
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        try AtomicFile.write(Array(data), to: path, mode: 0o600, sync: true)
        let directoryFD = open(directory, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        if directoryFD >= 0 {
            fsync(directoryFD)
            close(directoryFD)
        }
    }
}

/// The journal as a module: it saves in the `upward` phase, after the `work` phase recorded
/// the last processes' directories.
public struct ChatPathsModule: AgentModule {
    public let journal: ChatPathsJournal

    public init(journal: ChatPathsJournal) {
        self.journal = journal
    }

    public var name: String { "chat paths" }

    public var services: [ModuleService] {
        [ModuleService("chat paths journal", journal, stopsIn: .upward)]
    }
}
