import AgentCore
import AgentHTTP
import Synchronization
import FoundationEssentials
import Glibc
import HTTPTypes
import Hummingbird
import NIOCore
import NIOPosix

/// Screen recordings through `portabledesktop record`: at most 5 at once,
/// stopped with SIGINT (15 s, else killed and reported corrupted), at most 100 MB, answered
/// as `multipart/mixed` (the video, then the thumbnail when there is one) streamed from the
/// files, which are then deleted. A recording with no action for 10 minutes stops itself;
/// starting one counts as an action (as the reference's), so a recording started on a
/// desktop idle for longer runs its 10 minutes too.
///
/// A stop forgets its recording whatever the outcome: the files are sent and then deleted,
/// or deleted at once when the stop fails, so a second stop of the id is 404 (the reference
/// keeps every recording and its file until shutdown and sends the video again). Recordings
/// that finished without a stop (idle) are kept for one, at most ``maxFinishedKept`` of
/// them: a start forgets the oldest beyond that, with their files. Memory and disk: at most
/// 5 running and 16 finished recordings.
///
/// The files are named as the reference names them, `coder-recording-<id>.mp4` and
/// `.thumb.jpg`, but in a directory of the agent's own (mode 0700, made at the first start
/// inside `$TMPDIR`, removed at shutdown), not in `$TMPDIR` itself: in a shared `/tmp` another
/// user could plant a link at the name for the recorder to write through, and a name there
/// is not the agent's to unlink.
///
/// Calls for one id run one at a time, in arrival order (the reference holds one lock
/// through every start and stop): of two stops at once, the second waits for the first and
/// finds the recording forgotten (404); of two starts, the second finds it running. A start
/// reserves its place among the 5 before it spawns, so starts of other ids at once cannot
/// pass the limit either.
actor Recorder {
    struct Recording {
        var child: SupervisedChild
        var video: String
        var thumbnail: String
        /// Start order (the oldest finished ones are forgotten first).
        var sequence: UInt64
        /// When it started: the idle stop counts from here at the earliest.
        var startedAt: ContinuousClock.Instant
    }

    static let maxActive = 5
    static let maxBytes = 100 << 20
    static let stopGrace: Duration = .seconds(15)
    static let idleStop: Duration = .seconds(600)
    /// Finished recordings kept for a stop that has not come.
    static let maxFinishedKept = 16

    /// Recordings known: running, or finished and not yet stopped.
    var count: Int { recordings.count }
    var runningCount: Int { recordings.values.filter(\.child.isRunning).count }

    let supervisor: DesktopSupervisor
    /// Where the private directory is made.
    nonisolated let parent: String
    /// The recordings' directory, once the first start made it.
    private(set) var directory: String?
    /// Set when ``close()`` begins: an answer sending its files then removes the directory.
    nonisolated let shutDown = OnceFlag()
    private var recordings: [String: Recording] = [:]
    private var nextSequence: UInt64 = 0
    private var closed = false
    /// Ids a start or stop works on, each with the calls waiting their turn for it.
    private var busy: [String: [CheckedContinuation<Void, Never>]] = [:]
    /// Starts past the limit's check whose recorder is not spawned yet (they count in it).
    private var starting = 0

    init(supervisor: DesktopSupervisor, parent: String = temporaryDirectory()) {
        self.supervisor = supervisor
        self.parent = parent
    }

    /// The recordings' private directory, made on first use.
    private func recordingsDirectory() throws(APIError) -> String {
        if let directory { return directory }
        do {
            let made = try makePrivateDirectory(in: parent, prefix: "coder-recordings-")
            directory = made
            return made
        } catch {
            throw APIError(.internalServerError, "Failed to start recording.", detail: error.description)
        }
    }

    /// Starts recording `id` on the running desktop (started if none runs), which must be
    /// one portabledesktop runs: 501 otherwise, also when it is the agent's own Xvnc, started
    /// before portabledesktop was found (`portabledesktop record` would film the desktop of
    /// its own state, not that one).
    func start(id: String) async throws(APIError) {
        if closed { throw APIError(.serviceUnavailable, "Desktop API is shutting down.") }
        guard await supervisor.portableDesktopBinary() != nil else {
            throw APIError(
                .notImplemented, "Desktop recording requires portabledesktop.",
                detail: "portabledesktop binary not found in PATH or script bin directory; the agent's own Xvnc desktop does not record.")
        }
        do {
            _ = try await supervisor.ensureStarted()
        } catch  where error == .closed {
            throw APIError(.serviceUnavailable, "Desktop API is shutting down.")
        } catch {
            throw APIError(.internalServerError, "Failed to start recording.", detail: error.description)
        }
        guard let binary = await supervisor.runningPortableDesktopBinary() else {
            throw APIError(
                .notImplemented, "Desktop recording requires portabledesktop.",
                detail:
                    "the running desktop is the agent's own Xvnc (started before portabledesktop was found), which does not record; the next desktop, once this one stops, is portabledesktop's.")
        }
        await claim(id)
        defer { release(id) }
        if closed { throw APIError(.serviceUnavailable, "Desktop API is shutting down.") }
        if let existing = recordings[id], existing.child.isRunning { return }
        guard runningCount + starting < Self.maxActive else {
            throw APIError(.internalServerError, "Failed to start recording.", detail: "too many active recordings (at most \(Self.maxActive))")
        }
        forgetOldFinished()
        let directory = try recordingsDirectory()
        let video = "\(directory)/coder-recording-\(id).mp4"
        let thumbnail = "\(directory)/coder-recording-\(id).thumb.jpg"
        // A finished recording of the id that a stop never fetched.
        _ = unlink(video)
        _ = unlink(thumbnail)
        let quiet = open("/dev/null", O_WRONLY | O_CLOEXEC)
        defer { if quiet >= 0 { Glibc.close(quiet) } }
        let argv = [
            binary, "record", "--idle-speedup", "20", "--idle-min-duration", "0.35", "--idle-noise-tolerance", "-38dB",
            "--thumbnail", thumbnail, video,
        ]
        starting += 1
        let child: SupervisedChild
        do {
            child = try await SupervisedChild.spawn(argv, environment: supervisor.configuration.environment, outputFD: quiet)
        } catch {
            starting -= 1
            throw APIError(.internalServerError, "Failed to start recording.", detail: "\(error)")
        }
        starting -= 1
        if closed {
            // Shutdown came while it spawned: ended as `close` ended the others.
            await child.stop(grace: .seconds(1))
            _ = unlink(video)
            _ = unlink(thumbnail)
            removeDirectoryIfEmpty()
            throw APIError(.serviceUnavailable, "Desktop API is shutting down.")
        }
        nextSequence += 1
        recordings[id] = Recording(child: child, video: video, thumbnail: thumbnail, sequence: nextSequence, startedAt: .now)
        // Activity, as the reference records it: the idle stop of recordings (and of the
        // desktop) counts from now.
        await supervisor.recordActivity()
    }

    func stop(id: String) async throws(APIError) -> Response {
        if closed { throw APIError(.serviceUnavailable, "Desktop API is shutting down.") }
        await claim(id)
        defer { release(id) }
        if closed { throw APIError(.serviceUnavailable, "Desktop API is shutting down.") }
        guard let recording = recordings[id] else {
            throw APIError(.notFound, "Recording not found.", detail: "no recording with id \(id)")
        }
        if recording.child.isRunning {
            recording.child.signal(SIGINT)
            if !(await recording.child.waitForExit(timeout: Self.stopGrace)) {
                await recording.child.stop(grace: .seconds(1))
                forget(id, recording, deletingFiles: true)
                throw APIError(.internalServerError, "Recording is corrupted.", detail: "the recorder did not finish within 15 s and was killed")
            }
        }
        let size = fileSize(atPath: recording.video)
        guard size > 0 else {
            forget(id, recording, deletingFiles: true)
            throw APIError(.internalServerError, "Recording is corrupted.", detail: "the recorder left no video")
        }
        guard size <= Self.maxBytes else {
            forget(id, recording, deletingFiles: true)
            throw APIError(.contentTooLarge, "Recording file exceeds maximum allowed size.")
        }
        let thumbnailSize = fileSize(atPath: recording.thumbnail)
        // The answer deletes the files once sent (or once it fails). It reads them under
        // names of their own: a start of the id while it is sent writes these paths again.
        forget(id, recording, deletingFiles: false)
        let video = Self.setAside(recording.video)
        let thumbnail = thumbnailSize > 0 ? Self.setAside(recording.thumbnail) : nil
        if thumbnail == nil { _ = unlink(recording.thumbnail) }
        // An answer still being sent at shutdown removes the directory once its files go.
        let (mark, directory) = (shutDown, self.directory)
        return Self.multipart(video: (video, size), thumbnail: thumbnail.map { (path: $0, size: thumbnailSize) }) {
            if mark.isSet, let directory { _ = rmdir(directory) }
        }
    }

    /// Waits until no other start or stop works on `id` (those before it in arrival order),
    /// then takes it; ``release(_:)`` gives it back.
    private func claim(_ id: String) async {
        guard busy[id] != nil else {
            busy[id] = []
            return
        }
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            busy[id, default: []].append(continuation)
        }
    }

    /// Hands `id` to the next call waiting for it, or frees it.
    private func release(_ id: String) {
        guard var waiting = busy[id] else { return }
        if waiting.isEmpty {
            busy[id] = nil
        } else {
            let next = waiting.removeFirst()
            busy[id] = waiting
            next.resume()
        }
    }

    /// `path` moved to a name of its own (same directory), or `path` if it cannot be moved.
    private static func setAside(_ path: String) -> String {
        let aside = "\(path).sent-\(UUID().uuidString.lowercased().prefix(8))"
        return rename(path, aside) == 0 ? aside : path
    }

    /// Drops `id`'s entry if it is still `recording` (shutdown may have dropped it while the
    /// stop waited), with its files when asked.
    private func forget(_ id: String, _ recording: Recording, deletingFiles: Bool) {
        guard let current = recordings[id], current.sequence == recording.sequence else { return }
        recordings[id] = nil
        if deletingFiles { Self.deleteFiles(of: current) }
    }

    /// Before a start: forgets the oldest finished recordings so that at most
    /// ``maxFinishedKept`` remain with the new one; not one a start or stop works on (the
    /// starting id, which the start replaces, or one a stop is about to send).
    private func forgetOldFinished() {
        let finished = recordings.filter { busy[$0.key] == nil && !$0.value.child.isRunning }.sorted { $0.value.sequence < $1.value.sequence }
        for (oldID, recording) in finished.dropLast(Self.maxFinishedKept - 1) {
            recordings[oldID] = nil
            Self.deleteFiles(of: recording)
        }
    }

    private static func deleteFiles(of recording: Recording) {
        _ = unlink(recording.video)
        _ = unlink(recording.thumbnail)
    }

    /// Removes the private directory at shutdown if nothing is left in it (an answer still
    /// sending holds its set-aside files there; its own delete runs after).
    private func removeDirectoryIfEmpty() {
        if let directory, rmdir(directory) == 0 { self.directory = nil }
    }

    /// Stops recordings no action touched for ``idleStop`` since `lastActivity` or their own
    /// start, whichever is later (their files stay for `stop`). A start records activity
    /// too, but `lastActivity` may have been read before it. `now`: the clock for tests.
    func stopIdle(lastActivity: ContinuousClock.Instant, now: ContinuousClock.Instant = .now) async {
        // Not one a stop is finishing (it had its SIGINT).
        for (id, recording) in recordings where busy[id] == nil && recording.child.isRunning && now - max(lastActivity, recording.startedAt) >= Self.idleStop {
            recording.child.signal(SIGINT)
        }
    }

    /// Ends every recording and deletes its files.
    func close() async {
        closed = true
        shutDown.set()
        for recording in recordings.values {
            await recording.child.stop(grace: .seconds(1))
            Self.deleteFiles(of: recording)
        }
        recordings = [:]
        removeDirectoryIfEmpty()
    }

    /// `multipart/mixed`: the video part, then the thumbnail part, streamed from the files.
    static func multipart(
        video: (path: String, size: Int), thumbnail: (path: String, size: Int)?, afterDelete: @escaping @Sendable () -> Void = {}
    ) -> Response {
        let boundary = "coder-recording-" + UUID().uuidString.lowercased()
        var found: [(head: String, path: String, size: Int)] = [("Content-Type: video/mp4\r\n\r\n", video.path, video.size)]
        if let thumbnail { found.append(("Content-Type: image/jpeg\r\n\r\n", thumbnail.path, thumbnail.size)) }
        let parts = found
        let heads = parts.map { "--\(boundary)\r\n\($0.head)" }
        let tail = "--\(boundary)--\r\n"
        let length = zip(heads, parts).reduce(0) { $0 + $1.0.utf8.count + $1.1.size + 2 } + tail.utf8.count
        // Deleted however the answer ends, written or not (a client gone before it was
        // written releases it unwritten): the recorder has forgotten them already.
        let files = SetAsideFiles(parts.map(\.path), then: afterDelete)
        let body = ResponseBody(contentLength: length) { writer in
            defer { files.delete() }
            for (head, part) in zip(heads, parts) {
                try await writer.write(ByteBuffer(string: head))
                try await streamFile(part.path, size: part.size, into: &writer)
                try await writer.write(ByteBuffer(string: "\r\n"))
            }
            try await writer.write(ByteBuffer(string: tail))
            try await writer.finish(nil)
        }
        return Response(
            status: .ok, headers: [.contentType: "multipart/mixed; boundary=\(boundary)", .contentLength: String(length)], body: body)
    }

    /// Writes exactly `size` bytes of `path`, 256 KiB at a time, read on the thread pool.
    private static func streamFile(_ path: String, size: Int, into writer: inout any ResponseBodyWriter) async throws {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { throw APIError(.internalServerError, "Failed to stop recording.", detail: "open \(path)") }
        defer { Glibc.close(fd) }
        var offset = 0
        while offset < size {
            let at = offset
            let want = min(256 << 10, size - offset)
            let chunk = try await NIOThreadPool.singleton.runIfActive { () -> ByteBuffer in
                var buffer = ByteBuffer()
                _ = buffer.writeWithUnsafeMutableBytes(minimumWritableBytes: want) { raw in max(0, pread(fd, raw.baseAddress, want, off_t(at))) }
                return buffer
            }
            guard chunk.readableBytes > 0 else { throw APIError(.internalServerError, "Failed to stop recording.", detail: "\(path) ended early") }
            offset += chunk.readableBytes
            try await writer.write(chunk)
        }
    }
}

/// Files set aside for one answer: deleted once it is done with them, or when it is released
/// without having been written.
final class SetAsideFiles: Sendable {
    let paths: [String]
    private let deleted = Atomic(false)
    private let afterDelete: @Sendable () -> Void

    init(_ paths: [String], then afterDelete: @escaping @Sendable () -> Void = {}) {
        self.paths = paths
        self.afterDelete = afterDelete
    }

    /// Once: a second unlink could hit a file made at the same name meanwhile.
    func delete() {
        guard !deleted.exchange(true, ordering: .relaxed) else { return }
        for path in paths { _ = unlink(path) }
        afterDelete()
    }

    deinit { delete() }
}
