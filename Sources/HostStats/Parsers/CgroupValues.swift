/// The reference's three cgroup file readers (clistat's `readInt64`, `readInt64SepIdx`,
/// `readInt64Prefix`): the parse of a file's bytes, and the same over a ``HostFileSystem``.
public enum CgroupValues {
    /// The whole file, trimmed, as one integer (`memory.max`, `cpuacct.usage`).
    public static func int64(_ bytes: [UInt8], path: String) -> Result<Int64, StatError> {
        parse(GoText.trimSpace(bytes[...]), path: path)
    }

    /// Field `index` of the file split at every `separator` byte (`cpu.max`: `max 100000`).
    /// A file with too few fields is an error here, where the reference indexes past the end.
    public static func int64(_ bytes: [UInt8], path: String, separator: UInt8, index: Int) -> Result<Int64, StatError> {
        let parts = bytes.split(separator: separator, omittingEmptySubsequences: false)
        guard index >= 0, index < parts.count else {
            return .failure(StatError("expected line \(GoText.quote(bytes[...])) to have at least \(index + 1) parts"))
        }
        return parse(GoText.trimSpace(parts[index]), path: path)
    }

    /// The value of the first line starting with `prefix` (`memory.stat`: `inactive_file 123`);
    /// that line must have exactly two fields.
    public static func int64(_ bytes: [UInt8], path: String, prefix: String) -> Result<Int64, StatError> {
        let wanted = Array(prefix.utf8)
        for line in GoText.scannerLines(bytes) {
            let trimmed = GoText.trimSpace(line)
            guard trimmed.starts(with: wanted) else { continue }
            let fields = GoText.fields(trimmed)
            guard fields.count == 2 else {
                return .failure(StatError("parse \(path): expected two fields but got \(GoText.string(trimmed))"))
            }
            return parse(fields[1], path: path)
        }
        return .failure(StatError("parse \(path): did not find line with prefix \(prefix)"))
    }

    private static func parse(_ text: ArraySlice<UInt8>, path: String) -> Result<Int64, StatError> {
        GoNumbers.parseInt64(text).mapError { StatError("parse \(path): \($0.message)", syntax: $0.kind == .syntax) }
    }
}

extension HostFileSystem {
    /// `readInt64`.
    func int64(_ path: String) -> Result<Int64, StatError> {
        contents(path).flatMap { CgroupValues.int64($0, path: path) }
    }

    /// `readInt64SepIdx`.
    func int64(_ path: String, separator: UInt8, index: Int) -> Result<Int64, StatError> {
        contents(path).flatMap { CgroupValues.int64($0, path: path, separator: separator, index: index) }
    }

    /// `readInt64Prefix`.
    func int64(_ path: String, prefix: String) -> Result<Int64, StatError> {
        contents(path).flatMap { CgroupValues.int64($0, path: path, prefix: prefix) }
    }

    /// The file, or `read <path>: <why>` (afero's error wrapped as the readers wrap it).
    func contents(_ path: String) -> Result<[UInt8], StatError> {
        read(path).mapError { StatError($0).wrapped("read \(path)") }
    }
}
