import Glibc

extension AgentContext {
    /// The user's home: `$HOME` of the agent's environment, else the password database's entry
    /// for the agent's user, else `/`.
    public var homeDirectory: String {
        if let home = environment["HOME"], !home.isEmpty { return home }
        if let entry = getpwuid(getuid()), let dir = entry.pointee.pw_dir { return String(cString: dir) }
        return "/"
    }
}
