/// How a child ended, decoded from its `waitpid` status.
public struct ExitStatus: Sendable, Equatable {
    /// The exit code reported by the API: the child's code, or -1 when a signal killed it
    /// (Go's convention, kept for compatibility).
    public let code: Int
    /// The signal that killed the child, e.g. `SIGKILL`; nil for a normal exit.
    public let signal: String?

    public init(code: Int, signal: String?) {
        self.code = code
        self.signal = signal
    }

    /// Decodes a raw wait status (the kernel's layout, which WIFEXITED and friends read).
    public init(waitStatus status: Int32) {
        let termSignal = status & 0x7f
        if termSignal == 0 {
            self.init(code: Int((status >> 8) & 0xff), signal: nil)
        } else {
            self.init(code: -1, signal: ExitStatus.signalName(termSignal))
        }
    }

    /// `SIGTERM` for 15, `SIG<n>` for numbers without a name.
    public static func signalName(_ number: Int32) -> String {
        let names = [
            1: "SIGHUP", 2: "SIGINT", 3: "SIGQUIT", 4: "SIGILL", 5: "SIGTRAP", 6: "SIGABRT", 7: "SIGBUS",
            8: "SIGFPE", 9: "SIGKILL", 10: "SIGUSR1", 11: "SIGSEGV", 12: "SIGUSR2", 13: "SIGPIPE",
            14: "SIGALRM", 15: "SIGTERM", 16: "SIGSTKFLT", 17: "SIGCHLD", 18: "SIGCONT", 19: "SIGSTOP",
            20: "SIGTSTP", 21: "SIGTTIN", 22: "SIGTTOU", 23: "SIGURG", 24: "SIGXCPU", 25: "SIGXFSZ",
            26: "SIGVTALRM", 27: "SIGPROF", 28: "SIGWINCH", 29: "SIGIO", 30: "SIGPWR", 31: "SIGSYS",
        ]
        return names[Int(number)] ?? "SIG\(number)"
    }
}
