import Glibc
import Testing
@testable import AgentProc

@Suite struct RemoveTests {
    @Test func removeDeletesOnlyOwnedFiles() throws {
        let tmp = TempDir()
        defer { tmp.cleanup() }
        let store = try OutputSpoolStore(
            directory: tmp.path, limits: .init(segmentBytes: 4096, maxBytesPerSpool: 1 << 20, maxTotalBytes: 1 << 20),
            extraOwnedFiles: ["record.json"])
        let s = try store.create(id: "0a")
        appendPattern(s, count: 20_000, chunk: 3000)
        let dir = s.directory
        writeFile(dir + "/record.json", [1])
        writeFile(dir + "/meta.bin", [2])
        writeFile(dir + "/user.txt", [3])
        let outside = tmp.path + "/outside"
        writeFile(outside, [4])
        symlink(outside, dir + "/" + Posix.segmentName(1 << 40))
        store.remove(id: "0a", alsoDeleting: ["meta.bin"])
        #expect(Posix.listDirectory(dir).sorted() == [Posix.segmentName(1 << 40), "user.txt"])
        #expect(fileSize(outside) == 1)
        #expect(store.totalBytes == 0)
        // The handle is dead but harmless.
        #expect(s.read(from: 0, limit: 100).bytes.isEmpty)
        s.append([1, 2, 3])
        s.finish()
        #expect(Posix.listDirectory(dir).count == 2)
        unlink(dir + "/user.txt")
        unlink(dir + "/" + Posix.segmentName(1 << 40))
        store.remove(id: "0a")
        #expect(Posix.lstatInfo(dir) == nil)
        #expect(store.storedIDs().isEmpty)
        // The id can be used again.
        let again = try store.create(id: "0a")
        again.append([9])
        #expect(readAll(again).1 == [9])
    }
}
