#if canImport(Glibc)
import Glibc
#endif

/// A new directory only the agent's user can enter (`mkdtemp`: mode 0700, a fresh name that
/// nothing existing, a link included, can take): `<parent>/<prefix>XXXXXX`. Files the agent
/// names inside it cannot be planted or swapped by another user of a shared `/tmp`.
public func makePrivateDirectory(in parent: String = temporaryDirectory(), prefix: String) throws(SystemCallError) -> String {
    let base = parent.hasSuffix("/") ? parent : parent + "/"
    var template = Array((base + prefix + "XXXXXX").utf8CString)
    guard let made = template.withUnsafeMutableBufferPointer({ mkdtemp($0.baseAddress!) }) else {
        throw SystemCallError(call: "mkdtemp \(base)\(prefix)XXXXXX", errno: errno)
    }
    return String(cString: made)
}
