import Synchronization

/// The sessions running now by app name, as `UpdateStats` reports them (API 2.11's
/// `session_counts`, or 2.10's four fixed fields).
//
// The SSH server counts each session under its type (`CODER_SSH_SESSION_TYPE`, normalized as
// coderd's `idemetadata.Normalize`), JetBrains forwards and the reconnecting PTY under theirs.
// Memory: at most `maxNames` names at once; a session of a further name (not one of the four
// known ones) counts as `unknown`. A name leaves when its count drops to 0.
public final class SessionCounts: Sendable {
    /// The names the reference's agent knows, each with a field of its own before API 2.11.
    public enum Kind: Int, Sendable, CaseIterable {
        case ssh, vscode, jetbrains, reconnectingPTY

        /// The canonical app name (`reconnecting_pty`, …).
        public var name: String {
            switch self {
            case .ssh: return "ssh"
            case .vscode: return "vscode"
            case .jetbrains: return "jetbrains"
            case .reconnectingPTY: return "reconnecting_pty"
            }
        }
    }

    /// Names counted at once, at most (coderd keeps 64 per report).
    public static let maxNames = 64
    /// What a name beyond ``maxNames`` (or one that normalizes to nothing) counts as.
    public static let unknownName = "unknown"
    /// An app name is cut to this many Unicode scalars (coderd's `MaxAppNameLength`, in runes).
    public static let maxNameLength = 64

    private let counts = Mutex<[String: Int]>([:])

    public init() {}

    /// One more session of `kind`; balance it with ``ended(_:)``.
    public func started(_ kind: Kind) {
        _ = started(named: kind.name)
    }

    public func ended(_ kind: Kind) {
        ended(named: kind.name)
    }

    public func count(_ kind: Kind) -> Int {
        counts.withLock { $0[kind.name] ?? 0 }
    }

    /// One more session named `name` (already normalized); returns the name it counts under
    /// (`unknown` when ``maxNames`` others are counted), which ``ended(named:)`` must get.
    public func started(named name: String) -> String {
        counts.withLock { counts in
            var key = name
            let known = Kind.allCases.contains { $0.name == name } || name == Self.unknownName
            if counts[key] == nil, !known, counts.count >= Self.maxNames { key = Self.unknownName }
            counts[key, default: 0] += 1
            return key
        }
    }

    /// One session named `name` (as ``started(named:)`` returned it) ended.
    public func ended(named name: String) {
        counts.withLock { counts in
            guard let count = counts[name] else { return }
            counts[name] = count > 1 ? count - 1 : nil
        }
    }

    /// Every name with sessions running now and its count.
    public func snapshot() -> [String: Int64] {
        counts.withLock { counts in counts.mapValues { Int64($0) } }
    }

    /// The names coderd canonicalises (whatever their case, `-` or `_`); any other name it
    /// keeps as sent (`coder ssh --usage-app` passes any).
    public static let knownNames: Set<String> = [
        "vscode", "vscode_insiders", "cursor", "windsurf", "positron", "vscodium", "jetbrains", "ssh", "reconnecting_pty", unknownName,
    ]

    /// A client's session type as coderd stores it: control characters removed, cut to
    /// ``maxNameLength`` scalars; a known name (``knownNames``) in its canonical form, any
    /// other as it is; `unknown` when nothing is left.
    public static func normalized(_ raw: String) -> String {
        var scalars = String.UnicodeScalarView()
        var kept = 0
        for scalar in raw.unicodeScalars where scalar.properties.generalCategory != .control {
            guard kept < maxNameLength else { break }
            scalars.append(scalar)
            kept += 1
        }
        let text = String(scalars)
        guard !text.isEmpty else { return unknownName }
        let canonical = String(text.lowercased().map { $0 == "-" ? "_" : $0 })
        return knownNames.contains(canonical) ? canonical : text
    }
}
