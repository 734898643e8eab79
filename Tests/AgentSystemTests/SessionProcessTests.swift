import AgentSystem
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// ``SessionProcess``'s descriptors: a terminal session's are two of the terminal's primary
/// side, made at the spawn, so NIO's pipe channel never has to dup one (it traps when that
/// fails). Before, `input` was -1 and each caller had NIO dup `output`.
struct SessionProcessTests {
    @Test func aTerminalSessionHasTwoDescriptorsOfItsPrimarySide() throws {
        let process = try SessionProcess.spawn(
            argv: ["/bin/sh", "-c", "exit 0"], environment: { _ in [:] }, directory: "/", terminal: (rows: 24, columns: 80))
        defer {
            close(process.output)
            close(process.input)
        }
        #expect(process.output >= 0 && process.input >= 0 && process.input != process.output && process.errors == -1)
        var read = stat()
        var written = stat()
        #expect(fstat(process.output, &read) == 0 && fstat(process.input, &written) == 0)
        #expect(read.st_rdev == written.st_rdev && read.st_ino == written.st_ino, "the same terminal")
        #expect(fcntl(process.input, F_GETFD) & FD_CLOEXEC != 0, "not inherited by later children")
        #expect(process.waitForExit() == 0)
    }
}
