/// The part of a session's environment every kind of session shares (SSH, the reconnecting
/// PTY), in the reference's order of precedence: the agent's own environment (without
/// `GOTRACEBACK=none`), `USER`, `LOGNAME` and `SHELL` when the agent's environment has none,
/// then what a client sent (never replacing any of those; a name with `=` or NUL, or a
/// value with NUL, is left out); the manifest's variables
/// (`CODER=true`, the workspace's names, the template's variables) over all of those.
public enum SessionVariables {
    public static func base(
        agent: [String: String], client: [(name: String, value: String)] = [], manifest: [String: String], user: String, shell: String
    ) -> [String: String] {
        var environment = agent
        environment["GOTRACEBACK"] = environment["GOTRACEBACK"] == "none" ? nil : environment["GOTRACEBACK"]
        // Before the client's, so a client cannot set them (the reference appends them last).
        for (name, value) in [("USER", user), ("LOGNAME", user), ("SHELL", shell)] where environment[name] == nil {
            environment[name] = value
        }
        for (name, value) in client where environment[name] == nil && isValidName(name) && !value.utf8.contains(0) {
            environment[name] = value
        }
        for (name, value) in manifest { environment[name] = value }
        return environment
    }

    /// A name a client may set: not empty, no `=` (`PATH=/x` with value `y` became a second
    /// `PATH` entry that won) and no NUL (the C string would end there).
    static func isValidName(_ name: String) -> Bool {
        !name.isEmpty && !name.utf8.contains(UInt8(ascii: "=")) && !name.utf8.contains(0)
    }
}
