/// The part of a session's environment every kind of session shares (SSH, the reconnecting
/// PTY), in the reference's order of precedence: the agent's own environment (without
/// `GOTRACEBACK=none`), then what a client sent (never replacing an agent variable), `USER`,
/// `LOGNAME` and `SHELL` when the agent's environment has none; the manifest's variables
/// (`CODER=true`, the workspace's names, the template's variables) over all of those.
public enum SessionVariables {
    public static func base(
        agent: [String: String], client: [(name: String, value: String)] = [], manifest: [String: String], user: String, shell: String
    ) -> [String: String] {
        var environment = agent
        environment["GOTRACEBACK"] = environment["GOTRACEBACK"] == "none" ? nil : environment["GOTRACEBACK"]
        for (name, value) in client where environment[name] == nil {
            environment[name] = value
        }
        for (name, value) in [("USER", user), ("LOGNAME", user), ("SHELL", shell)] where environment[name] == nil {
            environment[name] = value
        }
        for (name, value) in manifest { environment[name] = value }
        return environment
    }
}
