import CAgentSpawn
import Foundation
import Synchronization
import Testing

#if canImport(Glibc)
import Glibc
#endif

@testable import Scripts
import AgentTestSupport

private func record(_ index: Int, size: Int = 20) -> [UInt8] {
    var bytes = Array("r\(index):".utf8)
    while bytes.count < size { bytes.append(UInt8(0x61 + bytes.count % 26)) }
    return bytes
}

/// Peeks and acknowledges until empty; returns everything in order.
private func drain(_ journal: UploadJournal, maxRecords: Int = 1000, maxBytes: Int = 1 << 20) -> [[UInt8]] {
    var all: [[UInt8]] = []
    while let batch = journal.peek(maxRecords: maxRecords, maxBytes: maxBytes) {
        all += batch.records
        journal.acknowledge(through: batch.end)
    }
    return all
}

private func cursorBytes(generation: UInt64, offset: UInt64) -> [UInt8] {
    var body: [UInt8] = []
    for shift in stride(from: 0, to: 64, by: 8) { body.append(UInt8(truncatingIfNeeded: generation >> UInt64(shift))) }
    for shift in stride(from: 0, to: 64, by: 8) { body.append(UInt8(truncatingIfNeeded: offset >> UInt64(shift))) }
    let crc = CRC32C.checksum(body)
    return Array("CJC1".utf8) + [UInt8(crc & 0xFF), UInt8((crc >> 8) & 0xFF), UInt8((crc >> 16) & 0xFF), UInt8(crc >> 24)] + body
}

private func generation(ofDataFile path: String) -> UInt64 {
    let bytes = readFile(path)
    return (0..<8).reduce(0) { $0 | UInt64(bytes[8 + $1]) << (8 * UInt64($1)) }
}

/// The path with symbolic links resolved, as `/proc/*/fd` shows it.
private func canonicalPath(_ path: String) -> String? {
    guard let resolved = realpath(path, nil) else { return nil }
    defer { free(resolved) }
    return String(cString: resolved)
}

private func readLink(_ path: String) -> String? {
    var buffer = [CChar](repeating: 0, count: Int(PATH_MAX) + 1)
    let count = readlink(path, &buffer, buffer.count - 1)
    guard count > 0 else { return nil }
    return String(decoding: buffer[0..<count].map { UInt8(bitPattern: $0) }, as: UTF8.self)
}

/// This process's descriptors open on `path` (read from `/proc/self/fd`, without opening
/// the file: closing a descriptor of it would drop the journal's record lock).
private func descriptors(of path: String) -> [Int32] {
    let entries = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd")) ?? []
    return entries.compactMap { Int32($0) }.filter { readLink("/proc/self/fd/\($0)") == path }
}

/// A `sleep` child holding a copy of `fd` as its fd 3 (and nothing else of ours).
private struct Holder {
    let pid: pid_t

    /// Kills and reaps the child (ours: started by this test).
    func end() {
        _ = kill(pid, SIGKILL)
        var status: Int32 = 0
        while waitpid(pid, &status, 0) < 0 && errno == EINTR {}
    }
}

private func spawnHolding(_ fd: Int32) -> Holder? {
    var actions = posix_spawn_file_actions_t()
    posix_spawn_file_actions_init(&actions)
    defer { posix_spawn_file_actions_destroy(&actions) }
    posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
    posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0)
    posix_spawn_file_actions_addopen(&actions, 2, "/dev/null", O_WRONLY, 0)
    // dup2 clears close-on-exec on fd 3; every other descriptor of ours is closed, so the
    // child keeps no other test's socket open.
    posix_spawn_file_actions_adddup2(&actions, fd, 3)
    agent_spawn_actions_close_from(&actions, 4)
    var attributes = posix_spawnattr_t()
    posix_spawnattr_init(&attributes)
    defer { posix_spawnattr_destroy(&attributes) }
    var empty = sigset_t()
    sigemptyset(&empty)
    posix_spawnattr_setsigmask(&attributes, &empty)
    posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETSIGMASK))
    let argv: [UnsafeMutablePointer<CChar>?] = [strdup("sleep"), strdup("600"), nil]
    defer { for pointer in argv { free(pointer) } }
    var pid: pid_t = 0
    // posix_spawn returns once the child has exec'd (or failed to).
    guard posix_spawnp(&pid, "sleep", &actions, &attributes, argv, environ) == 0 else { return nil }
    return Holder(pid: pid)
}

/// What another process finds when it tries an fcntl record lock on `path` (as another
/// agent would): "held" or "free".
private func otherProcessLock(_ path: String) async -> String {
    let script = """
        import fcntl, sys
        f = open(sys.argv[1], "r+")
        try:
            fcntl.lockf(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
            print("free")
        except OSError:
            print("held")
        """
    return await ChildProgram.run(["python3", "-c", script, path]).stdout.trimmingCharacters(in: .whitespacesAndNewlines)
}

@Suite struct UploadJournalTests {
    @Test func crc32cKnownValue() {
        #expect(CRC32C.checksum(bytes("123456789")) == 0xE306_9283)
        #expect(CRC32C.checksum([]) == 0)
        let long = (0..<1000).map { UInt8(truncatingIfNeeded: $0 &* 31) }
        let split = long.withUnsafeBytes { CRC32C.update(CRC32C.update(0, UnsafeRawBufferPointer(rebasing: $0[0..<333])), UnsafeRawBufferPointer(rebasing: $0[333...])) }
        #expect(split == CRC32C.checksum(long))
    }

    @Test func appendPeekAcknowledgeInOrder() throws {
        let directory = temporaryDirectory() + "/nested/dir"
        defer { removeTree(directory) }
        let journal = try UploadJournal(directory: directory, name: "logs", capacityBytes: 1 << 20)
        #expect(fileMode(directory) == 0o700)
        #expect(fileMode(journal.dataPath) == 0o600)
        #expect(fileMode(journal.cursorPath) == 0o600)
        #expect(journal.peek(maxRecords: 10, maxBytes: 1000) == nil)
        #expect(journal.append((0..<10).map { record($0) }) == 10)
        #expect(journal.pendingRecords == 10)
        #expect(journal.pendingBytes == 10 * 28)
        let first = try #require(journal.peek(maxRecords: 3, maxBytes: 1000))
        #expect(first.records == (0..<3).map { record($0) })
        // Not acknowledged: the same again.
        #expect(journal.peek(maxRecords: 3, maxBytes: 1000)?.records == first.records)
        journal.acknowledge(through: first.end)
        #expect(journal.pendingRecords == 7)
        // maxBytes: 45 bytes of payload fit two 20-byte records.
        let second = try #require(journal.peek(maxRecords: 100, maxBytes: 45))
        #expect(second.records == [record(3), record(4)])
        // Part of a batch.
        journal.acknowledge(through: second.position(after: 1))
        #expect(journal.peek(maxRecords: 1, maxBytes: 1000)?.records == [record(4)])
        // An older position changes nothing.
        journal.acknowledge(through: first.end)
        #expect(journal.pendingRecords == 6)
        // A first record over maxBytes comes alone.
        #expect(journal.peek(maxRecords: 100, maxBytes: 1)?.records == [record(4)])
        #expect(drain(journal) == (4..<10).map { record($0) })
        #expect(journal.pendingRecords == 0)
        #expect(journal.pendingBytes == 0)
        // Empty records are records.
        #expect(journal.append([[], [1], []]) == 3)
        #expect(drain(journal) == [[], [1], []])
    }

    @Test func persistsAcrossReopen() throws {
        let directory = temporaryDirectory()
        defer { removeTree(directory) }
        do {
            let journal = try UploadJournal(directory: directory, name: "logs", capacityBytes: 1 << 20)
            journal.append((0..<5).map { record($0) })
            let batch = try #require(journal.peek(maxRecords: 2, maxBytes: 1000))
            journal.acknowledge(through: batch.end)
            // Handed out but never acknowledged: delivered again after the reopen.
            _ = journal.peek(maxRecords: 2, maxBytes: 1000)
            journal.close()
        }
        do {
            let journal = try UploadJournal(directory: directory, name: "logs", capacityBytes: 1 << 20)
            #expect(journal.pendingRecords == 3)
            #expect(journal.recoveredTruncations == 0)
            let batch = try #require(journal.peek(maxRecords: 2, maxBytes: 1000))
            #expect(batch.records == [record(2), record(3)])
            journal.acknowledge(through: batch.end)
            journal.append(record(5))
            journal.close()
        }
        do {
            let journal = try UploadJournal(directory: directory, name: "logs", capacityBytes: 1 << 20)
            #expect(drain(journal) == [record(4), record(5)])
            journal.close()
        }
        do {
            let journal = try UploadJournal(directory: directory, name: "logs", capacityBytes: 1 << 20)
            #expect(journal.pendingRecords == 0)
            #expect(journal.peek(maxRecords: 10, maxBytes: 1000) == nil)
            journal.close()
        }
    }

    @Test(.ownThreads) func oneJournalPerFiles() throws {
        let directory = temporaryDirectory()
        defer { removeTree(directory) }
        let journal = try UploadJournal(directory: directory, name: "logs", capacityBytes: 1000)
        #expect(throws: UploadJournal.OpenError.locked(journal.cursorPath)) {
            _ = try UploadJournal(directory: directory, name: "logs", capacityBytes: 1000)
        }
        #expect(throws: UploadJournal.OpenError.invalidName("a/b")) {
            _ = try UploadJournal(directory: directory, name: "a/b", capacityBytes: 1000)
        }
        journal.close()
        _ = try UploadJournal(directory: directory, name: "logs", capacityBytes: 1000)
    }

    /// The lock is the process's, not the open file's: a child that holds a copy of the
    /// locked descriptor (as every child does between fork and exec) does not keep a
    /// closed journal from being reopened — a flock did, `.locked` after a fork elsewhere —
    /// while a second journal in this process and another process are still kept out.
    @Test func aChildHoldingTheDescriptorDoesNotKeepTheLock() async throws {
        let directory = temporaryDirectory()
        defer { removeTree(directory) }
        let first = try UploadJournal(directory: directory, name: "logs", capacityBytes: 1000)
        let cursor = try #require(canonicalPath(first.cursorPath))
        let lockFD = try #require(descriptors(of: cursor).first, "the journal's descriptor of its cursor")
        // A real child holding the locked open file as its fd 3 (after exec, so for as long
        // as it lives), as a child spawned by another thread would until its exec.
        let holder = try #require(spawnHolding(lockFD))
        defer { holder.end() }
        #expect(readLink("/proc/\(holder.pid)/fd/3") == cursor, "the child holds the journal's open file")
        first.close()
        let reopened = try UploadJournal(directory: directory, name: "logs", capacityBytes: 1000)
        #expect(readLink("/proc/\(holder.pid)/fd/3") == cursor, "still, while reopening")
        // Still kept out: a second journal in this process (refused without touching the
        // lock), and another process locking as an agent does (fcntl record lock).
        #expect(throws: UploadJournal.OpenError.locked(reopened.cursorPath)) {
            _ = try UploadJournal(directory: directory, name: "logs", capacityBytes: 1000)
        }
        #expect(await otherProcessLock(reopened.cursorPath) == "held")
        reopened.append(record(1))
        reopened.close()
        #expect(await otherProcessLock(reopened.cursorPath) == "free")
        // And another process's lock keeps this one out.
        let other = try #require(ChildProgram.start(["python3", "-c", Self.lockAndWait, reopened.cursorPath]))
        defer { other.kill() }
        // Its first line, read on a thread of our own (a blocking read; it ends at the line
        // or when the child exits).
        let stdout = other.stdout
        let line = await onThread { () -> String in
            var bytes: [UInt8] = []
            var byte: UInt8 = 0
            while byte != 0x0A, read(stdout, &byte, 1) == 1 { bytes.append(byte) }
            return String(decoding: bytes, as: UTF8.self)
        }
        #expect(line == "locked\n")
        #expect(throws: UploadJournal.OpenError.locked(reopened.cursorPath)) {
            _ = try UploadJournal(directory: directory, name: "logs", capacityBytes: 1000)
        }
        other.kill()
        let last = try UploadJournal(directory: directory, name: "logs", capacityBytes: 1000)
        #expect(drain(last) == [record(1)])
    }

    /// Takes an fcntl record lock on argv[1] (as another agent would), says so, and keeps it
    /// until killed (stdin is a pipe nobody writes to).
    private static let lockAndWait = """
        import fcntl, sys
        f = open(sys.argv[1], "r+")
        fcntl.lockf(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
        print("locked", flush=True)
        sys.stdin.read()
        """

    @Test func tornTailIsCutAway() throws {
        let directory = temporaryDirectory()
        defer { removeTree(directory) }
        var validSize = 0
        do {
            let journal = try UploadJournal(directory: directory, name: "logs", capacityBytes: 1 << 20)
            journal.append((0..<3).map { record($0) })
            validSize = journal.fileBytes
            journal.close()
        }
        let path = directory + "/logs.journal"
        // A frame header announcing 100 bytes, then only 10 of them.
        writeFile(path, readFile(path) + [100, 0, 0, 0, 1, 2, 3, 4] + Array(repeating: 9, count: 10))
        do {
            let journal = try UploadJournal(directory: directory, name: "logs", capacityBytes: 1 << 20)
            #expect(journal.recoveredTruncations == 1)
            #expect(journal.pendingRecords == 3)
            #expect(journal.fileBytes == validSize)
            #expect(readFile(path).count == validSize)
            journal.append(record(3))
            journal.close()
        }
        // A torn frame header (5 bytes), then a payload bit flipped in the last record.
        writeFile(path, readFile(path) + [1, 2, 3, 4, 5])
        do {
            let journal = try UploadJournal(directory: directory, name: "logs", capacityBytes: 1 << 20)
            #expect(journal.recoveredTruncations == 1)
            #expect(journal.pendingRecords == 4)
            journal.close()
        }
        var data = readFile(path)
        data[data.count - 1] ^= 0x01
        writeFile(path, data)
        do {
            let journal = try UploadJournal(directory: directory, name: "logs", capacityBytes: 1 << 20)
            #expect(journal.recoveredTruncations == 1)
            #expect(drain(journal) == (0..<3).map { record($0) })
            journal.close()
        }
        // A garbled header: the file starts over.
        writeFile(path, Array(repeating: 0xEE, count: 40))
        do {
            let journal = try UploadJournal(directory: directory, name: "logs", capacityBytes: 1 << 20)
            #expect(journal.recoveredTruncations == 1)
            #expect(journal.pendingRecords == 0)
            journal.append(record(7))
            #expect(drain(journal) == [record(7)])
        }
    }

    @Test func cursorRecovery() throws {
        let directory = temporaryDirectory()
        defer { removeTree(directory) }
        let dataPath = directory + "/logs.journal"
        let cursorPath = directory + "/logs.cursor"
        do {
            let journal = try UploadJournal(directory: directory, name: "logs", capacityBytes: 1 << 20)
            journal.append((0..<3).map { record($0) })
            journal.close()
        }
        let gen = generation(ofDataFile: dataPath)
        // A cursor past the end (compaction 1 cut short after the truncation): empty.
        writeFile(cursorPath, cursorBytes(generation: gen, offset: 1_000_000))
        do {
            let journal = try UploadJournal(directory: directory, name: "logs", capacityBytes: 1 << 20)
            #expect(journal.pendingRecords == 0)
            #expect(journal.peek(maxRecords: 10, maxBytes: 1000) == nil)
            journal.append((3..<5).map { record($0) })
            #expect(journal.peek(maxRecords: 10, maxBytes: 1000)?.records == [record(3), record(4)])
            journal.close()
        }
        // A cursor of the previous generation (compaction 2 cut short after the rename):
        // the whole file is unacknowledged, whatever its offset says.
        writeFile(cursorPath, cursorBytes(generation: generation(ofDataFile: dataPath) &- 1, offset: 44))
        do {
            let journal = try UploadJournal(directory: directory, name: "logs", capacityBytes: 1 << 20)
            #expect(journal.pendingRecords == 2)
            journal.close()
        }
        // A garbled cursor: everything again (duplicates, never loss).
        writeFile(cursorPath, Array(repeating: 1, count: 24))
        do {
            let journal = try UploadJournal(directory: directory, name: "logs", capacityBytes: 1 << 20)
            #expect(drain(journal) == [record(3), record(4)])
            journal.close()
        }
    }

    @Test func capacityRefuses() throws {
        let directory = temporaryDirectory()
        defer { removeTree(directory) }
        // Frames of 28 bytes: three fit in 100.
        let journal = try UploadJournal(directory: directory, name: "logs", capacityBytes: 100)
        #expect(journal.append((0..<5).map { record($0) }) == 3)
        #expect(journal.refused == 2)
        // In order: a small record after a refused one is refused too; nothing fits now anyway.
        #expect(journal.append([record(5), [1]]) == 0)
        #expect(journal.refused == 4)
        let batch = try #require(journal.peek(maxRecords: 1, maxBytes: 1000))
        journal.acknowledge(through: batch.end)
        #expect(journal.append(record(6)))
        #expect(drain(journal) == [record(1), record(2), record(6)])
        // Too large for the journal at all.
        #expect(!journal.append(Array(repeating: 0, count: 200)))
        #expect(journal.refused == 5)
    }

    @Test func compactionWhenAllAcknowledged() throws {
        let directory = temporaryDirectory()
        defer { removeTree(directory) }
        let journal = try UploadJournal(directory: directory, name: "logs", capacityBytes: 1 << 20)
        journal.append((0..<100).map { record($0) })
        #expect(journal.fileBytes == 16 + 100 * 28)
        journal.discardAll()
        #expect(journal.pendingRecords == 0)
        #expect(journal.fileBytes == 16)
        #expect(readFile(journal.dataPath).count == 16)
        #expect(journal.compactions == 1)
        journal.append(record(100))
        journal.close()
        let reopened = try UploadJournal(directory: directory, name: "logs", capacityBytes: 1 << 20)
        #expect(drain(reopened) == [record(100)])
        #expect(reopened.fileBytes == 16)
    }

    @Test(.ownThreads) func compactionOfAcknowledgedPrefix() throws {
        let directory = temporaryDirectory()
        defer { removeTree(directory) }
        let journal = try UploadJournal(directory: directory, name: "logs", capacityBytes: 8 << 20)
        let count = 3000  // 3000 × 1008 bytes ≈ 2.9 MiB
        #expect(journal.append((0..<count).map { record($0, size: 1000) }) == count)
        // 1000 acknowledged (~1 MiB): below the threshold, no compaction.
        journal.acknowledge(through: try #require(journal.peek(maxRecords: 1000, maxBytes: 8 << 20)).end)
        #expect(journal.compactions == 0)
        #expect(journal.fileBytes == 16 + count * 1008)
        // 1600 acknowledged: above 1 MiB and above the 1400 left.
        journal.acknowledge(through: try #require(journal.peek(maxRecords: 600, maxBytes: 8 << 20)).end)
        #expect(journal.compactions == 1)
        #expect(journal.fileBytes == 16 + 1400 * 1008)
        #expect(readFile(journal.dataPath).count == 16 + 1400 * 1008)
        #expect(journal.pendingRecords == 1400)
        // Positions keep working across the compaction.
        let batch = try #require(journal.peek(maxRecords: 10, maxBytes: 1 << 20))
        #expect(batch.records == (1600..<1610).map { record($0, size: 1000) })
        journal.acknowledge(through: batch.end)
        journal.append(record(count, size: 1000))
        journal.close()
        let reopened = try UploadJournal(directory: directory, name: "logs", capacityBytes: 8 << 20)
        #expect(reopened.pendingRecords == 1391)
        #expect(drain(reopened) == (1610...count).map { record($0, size: 1000) })
        #expect(reopened.fileBytes == 16)
    }

    @Test(.ownThreads) func concurrentAppendsThenDrain() throws {
        let directory = temporaryDirectory()
        defer { removeTree(directory) }
        let journal = try UploadJournal(directory: directory, name: "logs", capacityBytes: 64 << 20)
        let threads = 8
        let perThread = 10_000
        onThreads(threads) { thread in
            for sequence in 0..<perThread {
                var payload: [UInt8] = [UInt8(thread)]
                withUnsafeBytes(of: UInt32(sequence).littleEndian) { payload += $0 }
                payload += Array(repeating: UInt8(thread), count: sequence % 50)
                if sequence % 7 == 0 {
                    // Sometimes two in one call.
                    _ = journal.append([payload])
                } else {
                    _ = journal.append(payload)
                }
            }
        }
        #expect(journal.pendingRecords == threads * perThread)
        #expect(journal.refused == 0)
        var next = [Int](repeating: 0, count: threads)
        var total = 0
        var ordered = true
        while let batch = journal.peek(maxRecords: 997, maxBytes: 64 << 10) {
            for payload in batch.records {
                let thread = Int(payload[0])
                let sequence = Int(payload[1]) | Int(payload[2]) << 8 | Int(payload[3]) << 16 | Int(payload[4]) << 24
                if sequence != next[thread] || payload.count != 5 + sequence % 50 { ordered = false }
                next[thread] = sequence + 1
                total += 1
            }
            journal.acknowledge(through: batch.end)
        }
        #expect(ordered)
        #expect(total == threads * perThread)
        #expect(next == [Int](repeating: perThread, count: threads))
        #expect(journal.pendingRecords == 0)
    }

    @Test(.ownThreads) func concurrentAppendsWhileConsuming() async throws {
        let directory = temporaryDirectory()
        defer { removeTree(directory) }
        let journal = try UploadJournal(directory: directory, name: "logs", capacityBytes: 1 << 20)
        let consumer = Task.detached { () -> [Int] in
            var next = [Int](repeating: 0, count: 4)
            var received = 0
            while received < 4 * 5000 {
                await journal.waitForRecords()
                while let batch = journal.peek(maxRecords: 100, maxBytes: 4096) {
                    for payload in batch.records {
                        let thread = Int(payload[0])
                        let sequence = Int(payload[1]) | Int(payload[2]) << 8
                        if sequence == next[thread] { next[thread] += 1 }
                        received += 1
                    }
                    journal.acknowledge(through: batch.end)
                }
            }
            return next
        }
        onThreads(4) { thread in
            var sequence = 0
            while sequence < 5000 {
                // Small capacity: retry what was refused.
                if journal.append([UInt8(thread), UInt8(sequence & 0xFF), UInt8(sequence >> 8)] + Array(repeating: 0, count: 60)) {
                    sequence += 1
                } else {
                    usleep(100)
                }
            }
        }
        #expect(await consumer.value == [5000, 5000, 5000, 5000])
    }

    @Test func waitForRecordsWakesAndCancels() async throws {
        let directory = temporaryDirectory()
        defer { removeTree(directory) }
        let journal = try UploadJournal(directory: directory, name: "logs", capacityBytes: 1 << 20)
        let woke = Atomic<Bool>(false)
        let waiter = Task {
            await journal.waitForRecords()
            woke.store(true, ordering: .sequentiallyConsistent)
        }
        try await Task.sleep(for: .milliseconds(100))
        let wokeEarly = woke.load(ordering: .sequentiallyConsistent)
        #expect(!wokeEarly)
        journal.append(record(0))
        await waiter.value
        let wokeLate = woke.load(ordering: .sequentiallyConsistent)
        #expect(wokeLate)
        // Records there: at once.
        await journal.waitForRecords()
        journal.discardAll()
        // Cancellation, before and while waiting.
        let cancelled = Task {
            await journal.waitForRecords()
            return Task.isCancelled
        }
        try await Task.sleep(for: .milliseconds(50))
        cancelled.cancel()
        #expect(await cancelled.value)
        let early = Task {
            withUnsafeCurrentTask { $0?.cancel() }
            await journal.waitForRecords()
            return true
        }
        #expect(await early.value)
        #expect(journal.pendingRecords == 0)
        // Many waiters, one append.
        let many = (0..<20).map { _ in Task { await journal.waitForRecords() } }
        try await Task.sleep(for: .milliseconds(50))
        journal.append(record(1))
        for task in many { await task.value }
        // Closing wakes waiters.
        journal.discardAll()
        let closing = Task { await journal.waitForRecords() }
        try await Task.sleep(for: .milliseconds(50))
        journal.close()
        await closing.value
        #expect(!journal.append(record(2)))
    }

    @Test(.ownThreads) func throughput() throws {
        let directory = temporaryDirectory()
        defer { removeTree(directory) }
        let journal = try UploadJournal(directory: directory, name: "logs", capacityBytes: 256 << 20)
        let payload = [UInt8](repeating: 0x61, count: 80)
        let count = 100_000
        var start = nowNanoseconds()
        for _ in 0..<count { journal.append(payload) }
        var elapsed = Double(nowNanoseconds() - start) / 1e9
        print("journal: \(count) single appends of 80 bytes: \(Int(Double(count) / elapsed)) records/s (\(String(Int(elapsed * 1000))) ms)")
        let batch = [[UInt8]](repeating: payload, count: 100)
        start = nowNanoseconds()
        for _ in 0..<(count / 100) { journal.append(batch) }
        elapsed = Double(nowNanoseconds() - start) / 1e9
        print("journal: \(count) appends of 80 bytes, 100 per call: \(Int(Double(count) / elapsed)) records/s (\(String(Int(elapsed * 1000))) ms)")
        start = nowNanoseconds()
        var drained = 0
        while let batch = journal.peek(maxRecords: 10_000, maxBytes: 1 << 20) {
            drained += batch.records.count
            journal.acknowledge(through: batch.end)
        }
        elapsed = Double(nowNanoseconds() - start) / 1e9
        print("journal: drained \(drained) records: \(Int(Double(drained) / elapsed)) records/s")
        #expect(drained == 2 * count)

        // The whole path per line: split, sanitise, encode, journal (batched per chunk).
        let line = Array(String(repeating: "x", count: 79).utf8) + [0x0A]
        let chunk = [UInt8]((0..<(65536 / 80)).flatMap { _ in line })
        let chunks = 1000
        var splitter = LogLineSplitter()
        let source = [UInt8](repeating: 1, count: 16)
        var lines = 0
        start = nowNanoseconds()
        for _ in 0..<chunks {
            var records: [[UInt8]] = []
            splitter.feed(chunk) { line in
                records.append(LogRecord(sourceID: source, level: LogRecord.levelInfo, createdAt: 0, output: LogSanitizer.sanitize(line.bytes)).encode())
            }
            lines += records.count
            journal.append(records)
            if journal.pendingBytes > 64 << 20 { journal.discardAll() }
        }
        elapsed = Double(nowNanoseconds() - start) / 1e9
        print("pipeline: \(lines) lines of 80 bytes split+sanitised+encoded+journaled: \(Int(Double(chunks * chunk.count) / elapsed / 1e6)) MB/s, \(Int(Double(lines) / elapsed)) lines/s")
        start = nowNanoseconds()
        var split = 0
        for _ in 0..<chunks { splitter.feed(chunk) { split += $0.bytes.count } }
        elapsed = Double(nowNanoseconds() - start) / 1e9
        print("splitter alone: \(Int(Double(chunks * chunk.count) / elapsed / 1e6)) MB/s")
    }
}

@Suite struct UploadJournalDamageTests {
    @Test func corruptionFoundWhileOpen() throws {
        let directory = temporaryDirectory()
        defer { removeTree(directory) }
        let journal = try UploadJournal(directory: directory, name: "logs", capacityBytes: 1 << 20)
        journal.append((0..<3).map { record($0) })
        // Flip a payload byte of the second record behind the journal's back.
        let fd = open(journal.dataPath, O_RDWR)
        var byte: UInt8 = 0xFF
        #expect(pwrite(fd, &byte, 1, off_t(16 + 28 + 8 + 5)) == 1)
        close(fd)
        let batch = try #require(journal.peek(maxRecords: 10, maxBytes: 1 << 20))
        #expect(batch.records == [record(0)])
        #expect(journal.recoveredTruncations == 1)
        #expect(journal.pendingRecords == 1)
        journal.append(record(9))
        #expect(drain(journal) == [record(0), record(9)])
    }
}
