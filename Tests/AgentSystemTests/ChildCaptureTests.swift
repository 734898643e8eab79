import AgentSystem
import Synchronization
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// Short commands run to completion on a reactor of the test's own, and a machine it drives.
struct ChildCaptureTests {
    static let bound: Duration = .seconds(30)

    static func shell(_ script: String) -> ChildSpec {
        ChildSpec(executable: "/bin/sh", arguments: ["/bin/sh", "-c", script], environment: ["PATH=/usr/bin:/bin"])
    }

    @Test func outputErrorsAndTheExitStatusAreCaptured() async {
        let reactor = ChildReactor(name: "test-capture")
        let result = await ChildCapture.run(
            Self.shell("echo out; echo err >&2; exit 3"), options: .init(maxOutput: 100, maxErrors: 100, timeout: Self.bound),
            reactor: reactor)
        #expect(result.status == 3 << 8)
        #expect(String(decoding: result.output, as: UTF8.self) == "out\n")
        #expect(String(decoding: result.errors, as: UTF8.self) == "err\n")
        #expect(!result.timedOut && !result.overflowed)
    }

    @Test func theDeadlineKillsTheGroupEvenWithTheTermSignalIgnored() async {
        let reactor = ChildReactor(name: "test-capture")
        let result = await ChildCapture.run(
            Self.shell("trap '' TERM; sleep 600 & exec sleep 600"), options: .init(maxOutput: 100, timeout: .milliseconds(100)),
            reactor: reactor)
        #expect(result.timedOut)
        #expect(result.status.map { $0 & 0x7f } == SIGKILL)
    }

    @Test func tooMuchOutputEndsTheRunWhenAsked() async {
        let reactor = ChildReactor(name: "test-capture")
        var options = ChildCapture.Options(maxOutput: 1000, timeout: Self.bound)
        options.killOnOverflow = true
        let result = await ChildCapture.run(Self.shell("exec yes"), options: options, reactor: reactor)
        #expect(result.overflowed)
        #expect(result.output.count == 1000)
    }

    @Test func blockingRunsWorkFromAThreadWithoutATask() {
        let reactor = ChildReactor(name: "test-capture")
        let result = ChildCapture.runBlocking(
            Self.shell("printf 'a: b\\n'"), options: .init(maxOutput: 100, timeout: Self.bound), reactor: reactor)
        #expect(result.status == 0)
        #expect(result.output == Array("a: b\n".utf8))
    }

    @Test func aDrivenMachineReadsToEOFAndEndsWhenWoken() async throws {
        let reactor = ChildReactor(name: "test-capture")
        let pipe = try #require(ChildPipe.output())
        let child = try reactor.spawn(
            ChildSpec(
                executable: "/bin/sh", arguments: ["/bin/sh", "-c", "echo hello"], environment: [], output: pipe.write))
        close(pipe.write)
        struct Machine {
            var fd: Int32
            var bytes: [UInt8] = []
            var stop = false
        }
        let machine = Mutex(Machine(fd: pipe.read))
        let eof = Latch()
        let ended = Latch()
        let driven = reactor.drive { driven in
            machine.withLock { m -> ChildReactor.Interest? in
                if m.stop {
                    if m.fd >= 0 { driven.close(m.fd) }
                    ended.open()
                    return nil
                }
                guard m.fd >= 0 else { return ChildReactor.Interest() }
                var chunk = [UInt8](repeating: 0, count: 256)
                let n = chunk.withUnsafeMutableBytes { read(m.fd, $0.baseAddress, $0.count) }
                if n > 0 { m.bytes += chunk[0..<n] }
                if n == 0 {
                    driven.close(m.fd)
                    m.fd = -1
                    eof.open()
                    return ChildReactor.Interest()
                }
                return ChildReactor.Interest(read: [m.fd])
            }
        }
        #expect(await sleep(for: Self.bound, orUntil: { await eof.wait() }) == .signalled)
        #expect(machine.withLock { $0.bytes } == Array("hello\n".utf8))
        #expect(await child.exited(within: Self.bound) == 0)
        machine.withLock { $0.stop = true }
        driven.wake()
        #expect(await sleep(for: Self.bound, orUntil: { await ended.wait() }) == .signalled)
    }
}
