import Foundation
import PackagePlugin

/// Writes `BuildInfo.swift` (the commit the package was built from) before every build of
/// the target that uses it, through `build-info.sh`. The script rewrites the file only
/// when the commit changed, so an unchanged tree recompiles nothing.
@main
struct BuildInfo: BuildToolPlugin {
    func createBuildCommands(context: PluginContext, target: any Target) throws -> [Command] {
        let output = context.pluginWorkDirectoryURL.appending(path: "generated")
        let script = context.package.directoryURL.appending(path: "Plugins/BuildInfo/build-info.sh")
        return [
            .prebuildCommand(
                displayName: "Build info (commit) for \(target.name)",
                executable: URL(fileURLWithPath: "/bin/sh"),
                arguments: [script.path, context.package.directoryURL.path, output.path],
                outputFilesDirectory: output
            )
        ]
    }
}
