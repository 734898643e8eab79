/// Which backend serves a new session, by the init's `BackendType` (the reference's rule):
/// empty means screen when it is installed, `screen` means screen, anything else buffered.
/// A screen that is asked for but not installed falls back to buffered, with a note to log.
enum PTYBackend: Equatable, Sendable {
    case buffered
    /// GNU screen, at this absolute path.
    case screen(String)

    /// The backend for `requested`, with `screenPath` where screen is (nil: not on PATH);
    /// `note` says why a requested screen was not used.
    static func choose(requested: String, screenPath: String?) -> (backend: PTYBackend, note: String?) {
        switch requested {
        case "":
            if let screenPath { return (.screen(screenPath), nil) }
            return (.buffered, nil)
        case "screen":
            if let screenPath { return (.screen(screenPath), nil) }
            return (.buffered, "screen is not on the agent's PATH; the buffered backend serves the session")
        default:
            return (.buffered, nil)
        }
    }
}
