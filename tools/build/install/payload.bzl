"""What tools/install links into one shared library: the static archives, link flags and headers
of a set of Ember libraries, less what another shared library already holds."""

def _owner(linker_input):
    return str(linker_input.owner)

def _payload_impl(ctx):
    excluded = {}
    for dep in ctx.attr.exclude:
        for linker_input in dep[CcInfo].linking_context.linker_inputs.to_list():
            excluded[_owner(linker_input)] = True
        for header in dep[CcInfo].compilation_context.headers.to_list():
            excluded[header.path] = True

    archives = []
    lines = []
    seen_flags = {}
    for dep in ctx.attr.deps:
        for linker_input in dep[CcInfo].linking_context.linker_inputs.to_list():
            # Link flags of every library, the excluded too: a flag such as -lcudart is needed by
            # each shared library that calls into it (tools/install links them --as-needed).
            for flag in linker_input.user_link_flags:
                if flag not in seen_flags:
                    seen_flags[flag] = True
                    lines.append("linkopt " + flag)
            if _owner(linker_input) in excluded:
                continue
            excluded[_owner(linker_input)] = True
            for library in linker_input.libraries:
                # Position-independent: fastbuild's archives are, and tools/install builds -c opt
                # with --force_pic.
                archive = library.pic_static_library or library.static_library
                if archive:
                    archives.append(archive)
                    lines.append("archive " + archive.path)

    defines = {}
    for dep in ctx.attr.exclude:
        for define in dep[CcInfo].compilation_context.defines.to_list():
            defines[define] = False
    for dep in ctx.attr.deps:
        for define in dep[CcInfo].compilation_context.defines.to_list():
            if define not in defines and define not in ctx.attr.private_defines:
                defines[define] = True
                lines.append("define " + define)

    # Include directories of toolkits whose headers the installed ones include (the CUDA toolkit's
    # for cuda/lang.h); they name the toolkit's place on the building machine.
    for dep in ctx.attr.public_system_deps:
        context = dep[CcInfo].compilation_context
        for directory in context.system_includes.to_list() + context.includes.to_list():
            lines.append("include " + directory)

    headers = []
    for dep in ctx.attr.deps:
        for header in dep[CcInfo].compilation_context.headers.to_list():
            # Ember's own headers only: system libraries' come from their packages.
            if header.owner.workspace_name != "" or header.path in excluded:
                continue
            # .cuh: the CUDA kernels' device code, which only nvcc reads.
            if header.short_path.endswith(".cuh"):
                continue
            if any([header.short_path.startswith(prefix) for prefix in ctx.attr.private_prefixes]):
                continue
            excluded[header.path] = True
            headers.append(header)
            lines.append("header " + header.short_path + " " + header.path)

    manifest = ctx.actions.declare_file(ctx.label.name + ".manifest")
    ctx.actions.write(manifest, "\n".join(lines) + "\n")
    return [DefaultInfo(files = depset([manifest] + archives + headers))]

ember_payload = rule(
    implementation = _payload_impl,
    attrs = {
        "deps": attr.label_list(providers = [CcInfo]),
        # Libraries (and their headers) that an earlier shared library holds.
        "exclude": attr.label_list(providers = [CcInfo]),
        # Headers that are not installed: backend internals no public header includes.
        "private_prefixes": attr.string_list(),
        # Libraries whose include directories users need too (e.g. the CUDA toolkit's).
        "public_system_deps": attr.label_list(providers = [CcInfo]),
        # Defines that only the backends' own headers need (e.g. Open MPI's, for mpi.h).
        "private_defines": attr.string_list(),
    },
)
