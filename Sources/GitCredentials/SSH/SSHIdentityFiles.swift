/// The identity files `ssh` would offer for a host (`ssh -G`'s `identityfile` lines, or
/// OpenSSH's defaults when `ssh -G` fails), so that `gitssh` can pass them with `-i` before the
/// Coder key: an `-i` alone would turn OpenSSH's defaults off.
public enum SSHIdentityFiles {
    /// What `ssh -G` prints for a host with no identity of its own (OpenSSH's defaults).
    public static let fallbackOutput = [
        "~/.ssh/id_rsa", "~/.ssh/id_dsa", "~/.ssh/id_ecdsa", "~/.ssh/id_ecdsa_sk",
        "~/.ssh/id_ed25519", "~/.ssh/id_ed25519_sk", "~/.ssh/id_xmss",
    ].map { "identityfile " + $0 }.joined(separator: "\n")

    /// `ssh -G` output read at most this far (its whole configuration is a few KiB).
    public static let maxOutputBytes = 1 << 20

    /// The `identityfile` lines' paths, `~/` expanded against `home`, kept when `exists`.
    public static func parse(_ output: String, home: String, exists: (String) -> Bool) -> [String] {
        var files: [String] = []
        for line in output.split(separator: "\n", omittingEmptySubsequences: true) {
            var text = Substring(line)
            if text.hasSuffix("\r") { text = text.dropLast() }
            guard text.hasPrefix("identityfile ") else { continue }
            var path = String(text.dropFirst("identityfile ".count))
            if path.hasPrefix("~/") { path = home + path.dropFirst() }
            if exists(path) { files.append(path) }
        }
        return files
    }
}
