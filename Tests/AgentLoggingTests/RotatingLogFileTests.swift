import AgentCore
@testable import AgentLogging
import Foundation
import Logging
import Synchronization
import Testing

/// `coder-agent.log` as the reference's lumberjack writes it: 5 MiB files, 19 backups named
/// `coder-agent-<UTC 2006-01-02T15-04-05.000>.log`, the oldest removed first.
@Suite struct RotatingLogFileTests {
    static func directory() throws -> String {
        let path = NSTemporaryDirectory() + "rotating-log-\(UUID().uuidString.prefix(8))"
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
        return path
    }

    static func files(_ directory: String) -> [String] {
        ((try? FileManager.default.contentsOfDirectory(atPath: directory)) ?? []).sorted()
    }

    static func write(_ path: String, _ text: String) throws {
        try #require(FileManager.default.createFile(atPath: path, contents: Data(text.utf8)))
    }

    static func size(_ path: String) -> Int {
        ((try? FileManager.default.attributesOfItem(atPath: path))?[.size] as? Int) ?? -1
    }

    /// A clock that starts at Go's reference time (2006-01-02T15:04:05.123Z) and moves 1 ms a call.
    static func steppingClock() -> @Sendable () -> timespec {
        let calls = Mutex(0)
        return {
            let n = calls.withLock { value in
                defer { value += 1 }
                return value
            }
            return timespec(tv_sec: 1_136_214_245 + (123 + n) / 1000, tv_nsec: ((123 + n) % 1000) * 1_000_000)
        }
    }

    /// Past 5 MiB the file becomes one backup named by the rotation's UTC time, and the
    /// line that did not fit starts the new file.
    @Test func rotatesPastFiveMiBUnderTheReferencesName() throws {
        let directory = try Self.directory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let file = RotatingLogFile(directory: directory, now: Self.steppingClock())
        let line = String(repeating: "x", count: 1023)  // 1 KiB with its newline
        for _ in 0..<(5 * 1024 + 3) { file.write(line) }

        #expect(Self.files(directory) == ["coder-agent-2006-01-02T15-04-05.123.log", "coder-agent.log"])
        #expect(Self.size(directory + "/coder-agent-2006-01-02T15-04-05.123.log") == 5 << 20)
        #expect(Self.size(directory + "/coder-agent.log") == 3 * 1024)
        var info = stat()
        #expect(stat(directory + "/coder-agent.log", &info) == 0 && info.st_mode & 0o777 == 0o600)
    }

    /// Only the newest 19 backups stay; a new file takes the old one's mode; an existing file
    /// is appended to.
    @Test func keepsTheNewestNineteenBackups() throws {
        let directory = try Self.directory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let path = directory + "/coder-agent.log"
        try Self.write(path, "from an earlier run\n")
        chmod(path, 0o644)
        // Not a backup of this log: left alone.
        try Self.write(directory + "/coder-agent-notes.log", "mine\n")
        let file = RotatingLogFile(directory: directory, maxBytes: 64, now: Self.steppingClock())
        for index in 0..<30 { file.write("line \(index) " + String(repeating: "y", count: 40)) }

        let backups = Self.files(directory).filter { file.isBackup($0) }
        #expect(backups.count == 19, "\(Self.files(directory))")
        // Every line (49 bytes) rotates a file of 64: the first one the earlier run's, at
        // .123; 30 rotations to .152, of which the newest 19 (.134 to .152) stay.
        #expect(backups.first == "coder-agent-2006-01-02T15-04-05.134.log" && backups.last == "coder-agent-2006-01-02T15-04-05.152.log")
        #expect(Self.files(directory).contains("coder-agent-notes.log"))
        #expect(try String(contentsOfFile: directory + "/" + backups[0], encoding: .utf8) == "line 10 " + String(repeating: "y", count: 40) + "\n")
        var info = stat()
        #expect(stat(path, &info) == 0 && info.st_mode & 0o777 == 0o644)
        #expect(try String(contentsOfFile: path, encoding: .utf8) == "line 29 " + String(repeating: "y", count: 40) + "\n")
    }

    /// Backup names are Go's layout in UTC, and only that shape counts as a backup.
    @Test func backupNames() {
        let file = RotatingLogFile(directory: "/nonexistent/logs/")
        #expect(file.path == "/nonexistent/logs/coder-agent.log")
        #expect(RotatingLogFile.backupTimestamp(timespec(tv_sec: 0, tv_nsec: 7_000_000)) == "1970-01-01T00-00-00.007")
        #expect(RotatingLogFile.backupTimestamp(timespec(tv_sec: 1_780_000_000, tv_nsec: 999_999_999)) == "2026-05-28T20-26-40.999")
        #expect(file.isBackup("coder-agent-2026-05-28T20-26-40.999.log"))
        #expect(!file.isBackup("coder-agent-2026-05-28T20-26-40.999.log.gz"))
        #expect(!file.isBackup("coder-agent-init-2026-05-28T20-26-40.999.log"))
        #expect(!file.isBackup("coder-agent.log"))
    }

    /// A directory that cannot be made loses the lines (reported once on stderr), nothing else.
    @Test func anUnusableDirectoryDropsLines() throws {
        let directory = try Self.directory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        try Self.write(directory + "/not-a-directory", "x")
        let file = RotatingLogFile(directory: directory + "/not-a-directory/logs")
        for _ in 0..<100 { file.write("lost") }
        #expect(Self.files(directory) == ["not-a-directory"])
    }

    /// A FIFO or a link at the file's name (the default directory is a shared `/tmp`) is not
    /// written: the lines are dropped (reported once), the link's target is untouched, and a
    /// write returns at once. Before, a FIFO blocked the open, and every thread that logs,
    /// for ever, and a link sent the lines into its target.
    @Test func aFIFOOrALinkAtTheNameIsNotWritten() async throws {
        let directory = try Self.directory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let fifoDirectory = directory + "/fifo"
        let linkDirectory = directory + "/link"
        for path in [fifoDirectory, linkDirectory] { try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true) }
        #expect(mkfifo(fifoDirectory + "/coder-agent.log", 0o600) == 0)
        let target = directory + "/target"
        try Self.write(target, "kept\n")
        #expect(symlink(target, linkDirectory + "/coder-agent.log") == 0)
        // On a thread of its own: a write that blocks must not hold the test's pool.
        let done = Mutex(false)
        let thread = Thread {
            RotatingLogFile(directory: fifoDirectory).write("to a fifo")
            RotatingLogFile(directory: linkDirectory).write("through a link")
            done.withLock { $0 = true }
        }
        thread.start()
        // Bounded: 30 s at most, looked at every 10 ms.
        for _ in 0..<3000 where !done.withLock({ $0 }) { try await Task.sleep(for: .milliseconds(10)) }
        #expect(done.withLock { $0 }, "the writes returned")
        #expect(try String(contentsOfFile: target, encoding: .utf8) == "kept\n")
    }

    /// Through the agent's handler: the file takes debug lines while stderr's handler is at
    /// info; a level set on a logger quiets the file too.
    @Test func theFileIsWrittenAtItsOwnLevel() throws {
        let directory = try Self.directory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let file = RotatingLogFile(directory: directory)
        let base = RecordingHandler(level: .info)
        let handler = AgentLogHandler(base: base, recent: RecentLogs(), forwarder: nil, label: "test", file: file, fileLevel: .debug)
        var logger = Logger(label: "test") { _ in handler }
        logger.debug("a debug line", metadata: ["k": "v"])
        logger.info("an info line")
        logger.trace("a trace line")
        logger.logLevel = .warning
        logger.info("quieted")
        logger.error("an error")

        let text = try String(contentsOfFile: directory + "/coder-agent.log", encoding: .utf8)
        let lines = text.split(separator: "\n").map { $0.split(separator: " ", maxSplits: 1).last.map(String.init) ?? "" }
        #expect(lines == ["debug test: a debug line k=v", "info test: an info line", "error test: an error"], "\(text)")
        #expect(base.messages == ["an info line", "an error"])
    }

    /// A value from outside cannot forge a line: control characters are escaped in the file
    /// and in text written to stderr (a message with a newline made a line of its own).
    @Test func controlCharactersCannotForgeALine() throws {
        let directory = try Self.directory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let file = RotatingLogFile(directory: directory)
        let base = RecordingHandler(level: .info)
        let handler = AgentLogHandler(
            base: base, recent: RecentLogs(), forwarder: nil, label: "test", file: file, fileLevel: .debug, escapesText: true)
        let logger = Logger(label: "test") { _ in handler }
        logger.info("app status\nforged", metadata: ["message": "hi\nfake log line\r\u{1b}[2J"])
        let text = try String(contentsOfFile: directory + "/coder-agent.log", encoding: .utf8)
        #expect(text.split(separator: "\n").count == 1, "\(text)")
        #expect(text.hasSuffix(#"info test: app status\nforged message=hi\nfake log line\r\x1b[2J"# + "\n"), "\(text)")
        #expect(base.messages == [#"app status\nforged"#])
    }
}

/// A base handler that records the messages it is given.
struct RecordingHandler: LogHandler {
    private let recorded = Recorded()
    var metadata: Logger.Metadata = [:]
    var logLevel: Logger.Level

    init(level: Logger.Level) { logLevel = level }

    var messages: [String] { recorded.messages.withLock { $0 } }

    subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    func log(event: LogEvent) { recorded.messages.withLock { $0.append(event.message.description) } }

    final class Recorded: Sendable {
        let messages = Mutex<[String]>([])
    }
}
