#if canImport(Glibc)
import Glibc
#endif

/// Takes a secret out of the agent's own environment once it has been read: any process of
/// the workspace user can read `/proc/<agent>/environ`, and an MCP server or a user command
/// is not meant to get the agent's token.
///
/// `unsetenv` alone is not enough: it only drops the pointer from `environ`, while the kernel
/// shows the original block (between the `env_start` and `env_end` that `/proc/self/stat`
/// reports). So the value's bytes are overwritten with NULs in that block (and in any
/// `environ` string outside it), then the variable is unset. The value lives on only in the
/// agent's own memory (its settings, the control plane's configuration, `AgentContext`).
enum EnvironmentScrub {
    /// The largest environment block scanned; the kernel caps argv plus environ far lower
    /// (a quarter of the stack limit, 32 pages per string).
    static let maxBlockBytes = 64 << 20

    /// Overwrites every `name=` value in the process's environment with NULs and unsets it.
    static func scrub(_ name: String) {
        let prefix = Array((name + "=").utf8)
        if let (start, end) = environmentBlock() {
            blank(prefix, in: UnsafeMutableRawBufferPointer(start: start, count: end - start))
        }
        // Strings set after start (setenv) live outside the block: blanked too.
        let strings: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>? = environ
        if var cursor = strings {
            while let entry = cursor.pointee {
                let length = strlen(entry)
                if length >= prefix.count, memcmp(entry, prefix, prefix.count) == 0 {
                    memset(entry + prefix.count, 0, length - prefix.count)
                }
                cursor += 1
            }
        }
        unsetenv(name)
    }

    /// Blanks the value of each NUL-terminated `prefix…` string in `block`.
    static func blank(_ prefix: [UInt8], in block: UnsafeMutableRawBufferPointer) {
        var index = 0
        while index < block.count {
            var end = index
            while end < block.count, block[end] != 0 { end += 1 }
            if end - index >= prefix.count, prefix.indices.allSatisfy({ block[index + $0] == prefix[$0] }) {
                for i in (index + prefix.count)..<end { block[i] = 0 }
            }
            index = end + 1
        }
    }

    /// `env_start` and `env_end` of this process (fields 50 and 51 of `/proc/self/stat`).
    static func environmentBlock() -> (UnsafeMutableRawPointer, UnsafeMutableRawPointer)? {
        let fd = open("/proc/self/stat", O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        var buffer = [UInt8](repeating: 0, count: 4096)
        let n = buffer.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
        guard n > 0, let close = buffer[..<n].lastIndex(of: UInt8(ascii: ")")) else { return nil }
        // Field 3 (state) is the first after the command's closing parenthesis.
        let fields = buffer[(close + 1)..<n].split(whereSeparator: { $0 == UInt8(ascii: " ") || $0 == UInt8(ascii: "\n") })
        guard fields.count > 48,
            let start = UInt(String(decoding: fields[47], as: UTF8.self)),
            let end = UInt(String(decoding: fields[48], as: UTF8.self)),
            start > 0, end > start, end - start <= UInt(maxBlockBytes),
            let startPointer = UnsafeMutableRawPointer(bitPattern: start),
            let endPointer = UnsafeMutableRawPointer(bitPattern: end)
        else { return nil }
        return (startPointer, endPointer)
    }

    /// Blanks (NULs) the value of `flag` in the process's own argv, which
    /// `/proc/<agent>/cmdline` shows: `--agent-token X` and `--agent-token=X`. Words after
    /// `--` are left alone; Swift's `CommandLine.arguments` is a copy and keeps the value.
    static func scrubArgument(_ flag: String) {
        let argv = CommandLine.unsafeArgv
        let assignment = Array((flag + "=").utf8)
        var index = 1
        while index < Int(CommandLine.argc), let word = argv[index] {
            if strcmp(word, "--") == 0 { return }
            if strcmp(word, flag) == 0, index + 1 < Int(CommandLine.argc), let value = argv[index + 1] {
                memset(value, 0, strlen(value))
                index += 1
            } else if strlen(word) >= assignment.count, memcmp(word, assignment, assignment.count) == 0 {
                memset(word + assignment.count, 0, strlen(word) - assignment.count)
            }
            index += 1
        }
    }
}
