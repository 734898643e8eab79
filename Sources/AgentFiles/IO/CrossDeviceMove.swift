import AgentCore
import AgentHTTP
import AgentSystem
import HTTPTypes

#if canImport(Glibc)
import Glibc
#endif

/// A move between file systems (where rename fails with EXDEV), as `mv` makes it for a file
/// or a symbolic link: a copy beside the destination (`.<base>.tmp.<8 chars>`, with the
/// source's mode, times and, when the agent runs as root, owner) renamed into place, then
/// the source removed. A failure or a client that leaves removes the copy and keeps the
/// source. A directory or special file is refused (400): copying a tree is left to the client.
///
/// Memory: none per byte (`sendfile` copies in the kernel, 8 MiB a call, the token checked
/// between calls).
enum CrossDeviceMove {
    static let chunk = 8 << 20

    static func move(_ source: String, _ info: stat, to destination: String, token: CancelToken) throws {
        let temporary = AtomicWriter.temporaryPath(for: destination)
        do {
            switch info.st_mode & S_IFMT {
            case S_IFREG: try copyFile(source, info, to: temporary, token: token)
            case S_IFLNK: try copyLink(source, info, to: temporary)
            default:
                throw APIError(
                    .badRequest,
                    "rename \(source) \(destination): \(SystemCallError.message(EXDEV)) (only a file or symbolic link moves between file systems)")
            }
            guard FS.rename(temporary, destination) == 0 else { throw FileSystemError.last("rename \(source)", destination).apiError }
        } catch {
            FS.unlink(temporary)
            throw error
        }
        guard FS.unlink(source) == 0 else { throw FileSystemError.last("remove", source).apiError }
    }

    private static func copyFile(_ source: String, _ info: stat, to temporary: String, token: CancelToken) throws {
        let input = FS.open(source, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC)
        guard input >= 0 else { throw FileSystemError.last("open", source).apiError }
        defer { close(input) }
        let output = FS.open(temporary, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o600)
        guard output >= 0 else { throw FileSystemError.last("open", temporary).apiError }
        var closed = false
        defer { if !closed { close(output) } }
        while true {
            try token.check()
            let copied = sendfile(output, input, nil, chunk)
            if copied == 0 { break }
            if copied < 0 {
                if errno == EINTR || errno == EAGAIN { continue }
                throw FileSystemError.last("write", temporary).apiError
            }
        }
        if geteuid() == 0 { _ = fchown(output, info.st_uid, info.st_gid) }
        // After the owner: a chown clears the set-user-ID and set-group-ID bits.
        _ = fchmod(output, info.st_mode & 0o7777)
        var times = [info.st_atim, info.st_mtim]
        _ = futimens(output, &times)
        closed = true
        guard close(output) == 0 else { throw FileSystemError.last("close", temporary).apiError }
    }

    private static func copyLink(_ source: String, _ info: stat, to temporary: String) throws {
        guard let target = FS.readlink(source) else { throw FileSystemError.last("readlink", source).apiError }
        let made = FilePathText.withCString(target) { t in FilePathText.withCString(temporary) { symlink(t, $0) } }
        guard made == 0 else { throw FileSystemError.last("symlink", temporary).apiError }
        if geteuid() == 0 { _ = FilePathText.withCString(temporary) { lchown($0, info.st_uid, info.st_gid) } }
    }
}
