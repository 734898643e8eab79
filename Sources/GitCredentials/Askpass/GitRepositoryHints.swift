/// The current branch and `origin`'s URL of the working directory's repository, which the
/// askpass request carries (failures leave them empty, as the reference's do).
enum GitRepositoryHints {
    static let timeout: Duration = .seconds(5)
    static let maxBytes = 4096

    static func read() -> (branch: String, remote: String) {
        func line(_ argv: [String]) -> String {
            guard let result = LocalCommand.capture(argv, maxBytes: maxBytes, timeout: timeout), result.status == 0 else { return "" }
            var text = Substring(String(decoding: result.output, as: UTF8.self))
            while let last = text.last, last == "\n" || last == "\r" || last == " " { text.removeLast() }
            return String(text)
        }
        return (line(["git", "rev-parse", "--abbrev-ref", "HEAD"]), line(["git", "config", "--get", "remote.origin.url"]))
    }
}

extension GitAskpass {
    /// Fills the branch and remote from the working directory's repository.
    public mutating func readRepositoryHints() {
        let hints = GitRepositoryHints.read()
        gitBranch = hints.branch
        gitRemoteOrigin = hints.remote
    }
}
