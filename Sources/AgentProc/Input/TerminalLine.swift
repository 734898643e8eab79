#if canImport(Glibc)
import Glibc
#endif

/// The line a terminal in canonical (line) mode holds for its child until a line end. The
/// kernel's line discipline keeps at most ``maxLineBytes`` of an unfinished line and
/// silently discards what comes beyond (the write still succeeds), so a write that would
/// make the line longer is refused instead. Tracked from what the agent wrote: bytes since
/// the last line end (newline; carriage return mapped to newline by `ICRNL`; the `EOL`,
/// `EOL2` and `EOF` characters), cleared by the kill character and by the signal
/// characters (which flush the input unless `NOFLSH`), one less per erase character. Other
/// editing (word erase, literal next) is not modelled, so the count may be high by those.
/// A terminal not in canonical mode (raw: editors, shells with line editing) has no such
/// limit; the count restarts then.
struct TerminalLine {
    /// Longest unfinished line the kernel keeps (`N_TTY_BUF_SIZE` 4096 less the line end's room).
    static let maxLineBytes = 4095

    /// Bytes of the unfinished line sent so far.
    private(set) var pending = 0

    /// What the terminal's settings make of each byte, read at each write (the child may
    /// change them at any time).
    struct Mode {
        enum Effect: UInt8 {
            case add, end, clear, erase, ignore
        }

        var effects = [Effect](repeating: .add, count: 256)

        /// The terminal's mode now; nil when it is not in canonical mode (or unreadable).
        init?(fd: Int32) {
            var settings = termios()
            guard tcgetattr(fd, &settings) == 0, settings.c_lflag & tcflag_t(ICANON) != 0 else { return nil }
            let cc = withUnsafeBytes(of: settings.c_cc) { Array($0) }
            func set(_ index: Int32, _ effect: Effect) {
                let char = cc[Int(index)]
                // 0 is `_POSIX_VDISABLE` on Linux: the function is off.
                if char != 0 { effects[Int(char)] = effect }
            }
            effects[Int(UInt8(ascii: "\n"))] = .end
            if settings.c_iflag & tcflag_t(IGNCR) != 0 {
                effects[Int(UInt8(ascii: "\r"))] = .ignore
            } else if settings.c_iflag & tcflag_t(ICRNL) != 0 {
                effects[Int(UInt8(ascii: "\r"))] = .end
            }
            set(VEOL, .end)
            set(VEOL2, .end)
            set(VEOF, .end)
            set(VKILL, .clear)
            set(VERASE, .erase)
            if settings.c_lflag & tcflag_t(ISIG) != 0 {
                let flush = settings.c_lflag & tcflag_t(NOFLSH) == 0
                for signal in [VINTR, VQUIT, VSUSP] { set(signal, flush ? .clear : .ignore) }
            }
        }
    }

    /// The unfinished line's length after `bytes`, or nil if at some point it would be
    /// longer than ``maxLineBytes``.
    func after(_ bytes: some Collection<UInt8>, mode: Mode) -> Int? {
        var length = pending
        for byte in bytes {
            switch mode.effects[Int(byte)] {
            case .add:
                length += 1
                if length > Self.maxLineBytes { return nil }
            case .end, .clear: length = 0
            case .erase: length = max(0, length - 1)
            case .ignore: continue
            }
        }
        return length
    }

    /// `bytes` went to the terminal (in canonical mode if `mode` is set).
    mutating func wrote(_ bytes: some Collection<UInt8>, mode: Mode?) {
        guard let mode else {
            pending = 0
            return
        }
        // What was written fitted (it was checked), so this is never nil in practice.
        pending = after(bytes, mode: mode) ?? Self.maxLineBytes
    }
}
