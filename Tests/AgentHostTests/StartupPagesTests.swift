import AgentHost
import AgentTestSupport
import Foundation
import Synchronization
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// Releasing start-up pages in a running process (this test process, other tests running
/// beside it) drops only clean file pages: what a mapping's pages were changed to stays.
@Suite struct StartupPagesTests {
    @Test func aReleaseKeepsEveryWrittenPageAndCodeRunsOn() throws {
        // A private mapping of a file named like a shared library, written, then made
        // read-only: the shape of a loaded object's relocated data.
        let path = NSTemporaryDirectory() + "startup-pages-\(getpid()).so"
        let size = 64 * 1024
        #expect(FileManager.default.createFile(atPath: path, contents: Data(repeating: 0x11, count: size)))
        defer { unlink(path) }
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        try #require(fd >= 0)
        defer { close(fd) }
        let mapped = try #require(mmap(nil, size, PROT_READ | PROT_WRITE, MAP_PRIVATE, fd, 0))
        try #require(mapped != MAP_FAILED)
        defer { munmap(mapped, size) }
        let bytes = mapped.assumingMemoryBound(to: UInt8.self)
        // One page written (anonymous now), the rest only read (clean file pages).
        for index in 0..<4096 { bytes[index] = 0x5A }
        var sum = 0
        for index in stride(from: 4096, to: size, by: 4096) { sum += Int(bytes[index]) }
        #expect(sum == 15 * 0x11)
        #expect(mprotect(mapped, size, PROT_READ) == 0)

        let advised = StartupPages.releaseNow()
        #expect(advised > 0, "the process's own text and libraries are released")

        #expect((0..<4096).allSatisfy { bytes[$0] == 0x5A }, "the written page is kept")
        #expect(stride(from: 4096, to: size, by: 4096).allSatisfy { bytes[$0] == 0x11 })
        // Code whose pages were dropped runs on (each first touch a fault, nothing else).
        let text = String(describing: Date(timeIntervalSince1970: 0))
        #expect(text.hasPrefix("1970-01-01"))
        #expect(try JSONSerialization.jsonObject(with: Data(#"{"a":[1,2]}"#.utf8)) is [String: Any])
    }

    /// Libraries loaded and unloaded while releases run: a release must never drop a page
    /// the loader is relocating. The earlier release dropped whatever smaps had shown as a
    /// clean read-only mapping, which could be a library's address reservation that its
    /// writable, relocated segment was being mapped into: this test crashed that build's
    /// test process in each of four runs. libvncclient, which the desktop itself loads on
    /// first use, brings a dozen libraries with it. Bounded: 2 s or 400 loads.
    @Test func releasesWhileLibrariesLoadAndUnloadLoseNothing() async throws {
        guard let probe = dlopen("libvncclient.so.1", RTLD_NOW | RTLD_LOCAL) else {
            Issue.record("libvncclient.so.1 is missing (Debian: libvncclient1, from libvncserver-dev)")
            return
        }
        dlclose(probe)
        let stop = StopFlag()
        let releaser = Thread { while !stop.value.load(ordering: .relaxed) { StartupPages.releaseNow() } }
        releaser.start()
        defer { stop.value.store(true, ordering: .relaxed) }
        let loads = await onThread { () -> Int in
            let end = ContinuousClock.now + .seconds(2)
            var loads = 0
            while loads < 400 && ContinuousClock.now < end {
                guard let handle = dlopen("libvncclient.so.1", RTLD_NOW | RTLD_LOCAL) else { return -1 }
                // A call through the library's relocated data: an allocation and its release.
                typealias Get = @convention(c) (Int32, Int32, Int32) -> UnsafeMutableRawPointer?
                typealias Cleanup = @convention(c) (UnsafeMutableRawPointer?) -> Void
                if let get = dlsym(handle, "rfbGetClient"), let cleanup = dlsym(handle, "rfbClientCleanup") {
                    let client = unsafeBitCast(get, to: Get.self)(8, 3, 4)
                    unsafeBitCast(cleanup, to: Cleanup.self)(client)
                }
                dlclose(handle)
                loads += 1
            }
            return loads
        }
        #expect(loads > 0, "libvncclient.so.1 loaded \(loads) times")
    }
}

/// Tells the releasing thread to end.
private final class StopFlag: Sendable {
    let value = Atomic(false)
}
