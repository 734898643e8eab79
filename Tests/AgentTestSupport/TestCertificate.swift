import Foundation

/// A throwaway self-signed EC P-256 certificate and its key, made by the `openssl` CLI in a
/// directory of their own (under the run's `TMPDIR`), valid one day.
public struct TestCertificate: Sendable {
    public let directory: String
    /// The PEM certificate's path.
    public let certificate: String
    /// The PEM key's path.
    public let key: String

    public struct Failure: Error, CustomStringConvertible {
        public let output: String
        public var description: String { "openssl could not make a certificate: \(output)" }
    }

    /// A certificate for `CN=commonName` with the subject alternative names `names`
    /// (openssl's syntax: `DNS:localhost,IP:127.0.0.1`; none when empty).
    public static func make(names: String, commonName: String = "localhost") async throws -> TestCertificate {
        let directory = NSTemporaryDirectory() + "test-certificate-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        let made = TestCertificate(directory: directory, certificate: directory + "/cert.pem", key: directory + "/key.pem")
        let outcome = await ChildProgram.run(
            [
                "openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
                "-keyout", made.key, "-out", made.certificate, "-days", "1", "-subj", "/CN=\(commonName)",
            ] + (names.isEmpty ? [] : ["-addext", "subjectAltName=\(names)"]), stderrToStdout: true)
        guard outcome.status == 0 else {
            made.remove()
            throw Failure(output: outcome.stdout)
        }
        return made
    }

    /// The certificate's PEM bytes.
    public var pem: [UInt8] { Array(FileManager.default.contents(atPath: certificate) ?? Data()) }

    public func remove() { try? FileManager.default.removeItem(atPath: directory) }
}
