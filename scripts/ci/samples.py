#!/usr/bin/env python3
"""Turns the Swift samples of README.md and the DocC catalog into consumer packages.

Usage: samples.py ROOT WORK TRAITS  (scripts/ci/check-samples.sh runs it; its head describes the
markers). Writes WORK/consumer (the package that depends on Lockbox alone), WORK/service (the
samples that need a service's packages, if any), WORK/programs (the program targets to run, one
a line) and WORK/count (how many samples there are).
"""
import glob
import os
import re
import sys

root, work, traits = sys.argv[1], sys.argv[2], sys.argv[3]
documents = ["README.md"] + sorted(os.path.relpath(p, root) for p in glob.glob(os.path.join(root, "Sources/Lockbox/Lockbox.docc/*.md")))
version = re.search(r'static let version = "([0-9.]+)"', open(os.path.join(root, "Sources/Lockbox/Version.swift"), encoding="utf-8").read()).group(1)

BLOCK = re.compile(r"(?:<!-- sample: (?P<marker>.*?) -->\n)?```swift\n(?P<body>.*?)```", re.S)
MARKER = re.compile(r"^(?P<service>service )?(?P<kind>manifest|program|(?:async )?fragment)(?:\((?P<params>.*?)\))?(?: run\((?P<args>.*)\))?$")

manifest_lines, programs, fragments, service_fragments = [], [], [], []
errors = []
count = 0
for document in documents:
    text = open(os.path.join(root, document), encoding="utf-8").read()
    for match in BLOCK.finditer(text):
        count += 1
        line = text[: match.start("body")].count("\n")
        where = f"{document}:{line}"
        marker = match.group("marker")
        if marker is None:
            errors.append(f"{where}: a ```swift block without a `<!-- sample: … -->` marker before it")
            continue
        parsed = MARKER.match(marker.strip())
        if not parsed:
            errors.append(f"{where}: unknown sample marker {marker!r}")
            continue
        body = match.group("body")
        kind = parsed.group("kind")
        if kind == "manifest":
            manifest_lines += body.splitlines()
        elif kind == "program":
            programs.append((where, body))
        else:
            entry = (where, kind.startswith("async"), parsed.group("params") or "", parsed.group("args"), body)
            (service_fragments if parsed.group("service") else fragments).append(entry)
if errors:
    sys.exit("check-samples:\n  " + "\n  ".join(errors))


def imports_and_code(body):
    """Splits a sample into its import lines and the rest."""
    imports = [l for l in body.splitlines() if re.match(r"^import \w+$", l)]
    code = "\n".join(l for l in body.splitlines() if not re.match(r"^import \w+$", l))
    return imports, code


# The manifest: the sample's `.package(url: …, from: …)` pointed at this checkout, through a link
# named as the URL's last component, so the sample's `package:` names hold.
dependencies = [l.strip().rstrip(",") for l in manifest_lines if l.strip().startswith(".package(")]
products = [l.strip().rstrip(",") for l in manifest_lines if l.strip().startswith(".product(")]
if len(dependencies) != 1 or not products:
    sys.exit("check-samples: the manifest sample must have one .package line and at least one .product line")
package = re.match(r'\.package\(url: "([^"]+)", from: "([^"]+)"\)$', dependencies[0])
if not package:
    sys.exit(f"check-samples: the manifest sample's dependency is not `.package(url: …, from: …)`: {dependencies[0]}")
if package.group(2) != version:
    sys.exit(f"check-samples: the manifest sample asks for {package.group(2)}, the package is {version} (Sources/Lockbox/Version.swift)")
identity = re.sub(r"\.git$", "", package.group(1).rstrip("/").rsplit("/", 1)[-1])
os.makedirs(f"{work}/link")
os.symlink(root, f"{work}/link/{identity}")
path_dependency = f'.package(path: "{work}/link/{identity}")'

SUPPORT = '''import Foundation
import Lockbox

// What the fragments take for granted: an API client, a reader of PINs and passphrases.
struct SampleAPI: Sendable {
    func refresh(_ refreshToken: SecretBytes?) async throws -> TokenSet { TokenSet(accessToken: SecretBytes(utf8: "new")) }
    func refresh(_ current: TokenSet) async throws -> TokenSet { TokenSet(accessToken: SecretBytes(utf8: "new")) }
}
func askForPIN() -> SecretBytes { SecretBytes(utf8: "4739") }
func askForPassphrase() -> SecretBytes { SecretBytes(utf8: "a passphrase") }
'''


def fragment_source(index, fragment):
    where, is_async, params, _, body = fragment
    imports, code = imports_and_code(body)
    effects = "async throws" if is_async else "throws"
    indented = "\n".join("    " + l if l else l for l in code.splitlines())
    return imports, f"// {where}\n@discardableResult\nfunc sample{index}({params}) {effects} -> Int {{\n{indented}\n    return 0\n}}\n"


def write_package(folder, dependencies, targets):
    os.makedirs(folder)
    target_lines = []
    for name, products_of_target, files in targets:
        os.makedirs(f"{folder}/Sources/{name}")
        for file, source in files.items():
            open(f"{folder}/Sources/{name}/{file}", "w", encoding="utf-8").write(source)
        target_lines.append(f'        .executableTarget(name: "{name}", dependencies: [{", ".join(products_of_target)}]),')
    open(f"{folder}/Package.swift", "w", encoding="utf-8").write(
        "// swift-tools-version:6.1\nimport PackageDescription\nlet package = Package(\n"
        f'    name: "{os.path.basename(folder).capitalize()}",\n'
        "    dependencies: [\n" + "".join(f"        {d},\n" for d in dependencies) + "    ],\n"
        "    targets: [\n" + "\n".join(target_lines) + "\n    ],\n"
        "    swiftLanguageModes: [.v6]\n)\n")


# What every fragment of the core consumer may use without saying so: the products a desktop app
# or a service's tests would depend on beside Lockbox (none of them brings a dependency), and
# swift-log and swift-system, whose types (Logger, FilePath) Lockbox's API uses.
CORE_IMPORTS = "import Foundation\nimport Lockbox\nimport LockboxSecretService\nimport LockboxTesting\nimport Logging\nimport SystemPackage\n"


def product_for(module):
    return f'.product(name: "{module}", package: "{identity}")'


core_targets = []
program_names = []
for index, (where, body) in enumerate(programs, 1):
    imports, code = imports_and_code(body)
    paths = re.findall(r'"(/[^"]+)"', code)
    if len(paths) < 2:
        sys.exit(f"check-samples: {where}: a program sample names fewer than two paths (vault, key file)")
    code = code.replace(f'"{paths[0]}"', "FilePath(CommandLine.arguments[1])").replace(f'"{paths[1]}"', "FilePath(CommandLine.arguments[2])")
    code += '\nprint("cli item:", try Vault(store: store).string(service: "readme-sample", account: "cli") ?? "missing")\n'
    name = f"Program{index}"
    program_names.append(name)
    modules = [i.split()[1] for i in imports]
    core_targets.append((name, products, {"main.swift": f"// {where}\n" + "\n".join(imports) + "\nimport SystemPackage\n" + code}))

files, modules, calls = {"Support.swift": SUPPORT}, {"Lockbox"}, []
for index, fragment in enumerate(fragments, 1):
    imports, source = fragment_source(index, fragment)
    modules.update(i.split()[1] for i in imports)
    files[f"Sample{index}.swift"] = CORE_IMPORTS + "\n".join(imports) + "\n" + source
    if fragment[3] is not None:
        calls.append(f'print("{fragment[0]}"); {"try await" if fragment[1] else "try"} sample{index}({fragment[3]})')
files["main.swift"] = '''import Foundation
import Lockbox
import SystemPackage

// The vault `lockbox init` made (arguments 1 and 2), a memory store, and a vault created through
// the library (argument 3; check-samples.sh checks that it is format 2). Opened in a synchronous
// function, as at a service's start-up: this top-level code awaits the async samples, so it is
// async code, where the blocking openers are refused.
func openAtStartUp() throws -> any KeySlotManaging {
    let fileVault = try FileVault.open(at: FilePath(CommandLine.arguments[1]), credential: .keyFile(FilePath(CommandLine.arguments[2])))
    _ = try FileVault.create(at: FilePath(CommandLine.arguments[3]), credentials: [.keyFile(FilePath(CommandLine.arguments[2]))])
    return fileVault
}
let fileVault = try openAtStartUp()
let memory = MemoryStore()
''' + "\n".join(calls) + '\nprint("fragments: all ran")\n'
fragment_products = products + [product_for(m) for m in sorted(modules | {"LockboxSecretService", "LockboxTesting"}) if m not in ("Lockbox", "Foundation", "SystemPackage", "Logging")]
fragment_products.append('.product(name: "Logging", package: "swift-log")')
core_targets.append(("Fragments", fragment_products, files))
write_package(f"{work}/consumer", [path_dependency], core_targets)
# The consumer names swift-system's SystemPackage (FilePath) as Lockbox's API does; Lockbox re-exports none.
with open(f"{work}/consumer/Package.swift", encoding="utf-8") as f:
    manifest = f.read()
manifest = manifest.replace("    dependencies: [\n", '    dependencies: [\n        .package(url: "https://github.com/apple/swift-system", from: "1.4.0"),\n        .package(url: "https://github.com/apple/swift-log", from: "1.16.2"),\n', 1)
manifest = manifest.replace('dependencies: [.product(name: "Lockbox"', 'dependencies: [.product(name: "SystemPackage", package: "swift-system"), .product(name: "Lockbox"')
open(f"{work}/consumer/Package.swift", "w", encoding="utf-8").write(manifest)
open(f"{work}/programs", "w").write("".join(n + "\n" for n in program_names))
open(f"{work}/count", "w").write(str(count))

if service_fragments:
    files, modules = {"Support.swift": SUPPORT}, {"Lockbox"}
    for index, fragment in enumerate(service_fragments, 1):
        imports, source = fragment_source(index, fragment)
        modules.update(i.split()[1] for i in imports)
        files[f"Sample{index}.swift"] = "import Foundation\nimport Lockbox\nimport Logging\nimport SystemPackage\n" + "\n".join(imports) + "\n" + source
    files["main.swift"] = "// Type-checked only: these samples need a network service or a configuration file.\n"
    known = {
        "Hummingbird": '.product(name: "Hummingbird", package: "hummingbird")',
        "Configuration": '.product(name: "Configuration", package: "swift-configuration")',
    }
    service_products = [product_for("Lockbox"), '.product(name: "SystemPackage", package: "swift-system")', '.product(name: "Logging", package: "swift-log")']
    service_products += [known.get(m, product_for(m)) for m in sorted(modules - {"Lockbox", "Foundation", "SystemPackage"})]
    trait_list = ", ".join(f'"{t}"' for t in traits.split(","))
    write_package(f"{work}/service", [
        f'.package(path: "{root}", traits: [{trait_list}])',
        '.package(url: "https://github.com/apple/swift-system", from: "1.4.0")',
        '.package(url: "https://github.com/apple/swift-log", from: "1.16.2")',
        '.package(url: "https://github.com/apple/swift-configuration", from: "1.4.0")',
        '.package(url: "https://github.com/hummingbird-project/hummingbird", from: "2.28.1")',
    ], [("ServiceSamples", service_products, files)])
    # The root's identity as a path dependency is its folder's name.
    with open(f"{work}/service/Package.swift", encoding="utf-8") as f:
        manifest = f.read()
    open(f"{work}/service/Package.swift", "w", encoding="utf-8").write(manifest.replace(f'package: "{identity}"', f'package: "{os.path.basename(root)}"'))
