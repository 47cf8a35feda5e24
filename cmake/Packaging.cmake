# What the Debian package adds to `cmake --install` (which installs only the programs,
# cli/CMakeLists.txt), and the CPack settings that make it:
#   cmake --build build --target package   ->   build/mcpcell_<version>_amd64.deb
# The package holds /usr/bin/mcpcell and /usr/bin/mcpcell-init (the server execs nothing
# else of ours), the systemd unit, the shipped policies and /etc/default/mcpcell as
# conffiles, and the docs. These files belong to the component "deb", left out of a plain
# `cmake --install` (its prefix is /usr/local, and the unit names /usr/bin/mcpcell).
# tests/packaging installs the result into a fresh Debian 12 root.
include_guard(GLOBAL)

set(MCPCELL_DEB_FILES ${PROJECT_SOURCE_DIR}/packaging)

install(FILES ${MCPCELL_DEB_FILES}/mcpcell.service DESTINATION /lib/systemd/system
        COMPONENT deb EXCLUDE_FROM_ALL)
install(FILES ${MCPCELL_DEB_FILES}/default.env DESTINATION /etc/default RENAME mcpcell
        COMPONENT deb EXCLUDE_FROM_ALL)
file(GLOB MCPCELL_SHIPPED_POLICIES CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/policies/*.toml)
install(FILES ${MCPCELL_SHIPPED_POLICIES} DESTINATION /etc/mcpcell/policies
        COMPONENT deb EXCLUDE_FROM_ALL)
file(GLOB MCPCELL_DOCS CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/docs/*.md)
install(FILES ${PROJECT_SOURCE_DIR}/README.md ${MCPCELL_DOCS} DESTINATION share/doc/mcpcell
        COMPONENT deb EXCLUDE_FROM_ALL)

# conffiles: dpkg keeps an operator's edits of these across upgrades and asks before
# replacing them.
set(MCPCELL_CONFFILES "/etc/default/mcpcell\n")
foreach(policy ${MCPCELL_SHIPPED_POLICIES})
  get_filename_component(name ${policy} NAME)
  string(APPEND MCPCELL_CONFFILES "/etc/mcpcell/policies/${name}\n")
endforeach()
file(WRITE ${PROJECT_BINARY_DIR}/deb/conffiles ${MCPCELL_CONFFILES})
foreach(script postinst prerm postrm)
  file(COPY ${MCPCELL_DEB_FILES}/deb/${script} DESTINATION ${PROJECT_BINARY_DIR}/deb
       FILE_PERMISSIONS OWNER_READ OWNER_WRITE OWNER_EXECUTE GROUP_READ GROUP_EXECUTE WORLD_READ
                        WORLD_EXECUTE)
endforeach()

set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME mcpcell)
set(CPACK_PACKAGE_VENDOR "mcpcell")
set(CPACK_PACKAGE_CONTACT "mcpcell maintainers <mcpcell@localhost>")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "MCP server that runs agents' tool calls in sandboxes")
string(CONCAT CPACK_PACKAGE_DESCRIPTION
       "mcpcell speaks the Model Context Protocol to AI agents and runs every tool call in "
       "an isolated per-session cell: Linux namespaces, an overlay root, cgroups, seccomp, "
       "no capabilities, and network only through an allowlisting egress proxy.")
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_STRIP_FILES ON)
# Everything in one .deb: the programs (the unnamed default component) and the files above.
set(CPACK_DEB_COMPONENT_INSTALL ON)
set(CPACK_COMPONENTS_GROUPING ALL_COMPONENTS_IN_ONE)
set(CPACK_COMPONENTS_ALL Unspecified deb)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SECTION admin)
set(CPACK_DEBIAN_PACKAGE_PRIORITY optional)
# Depends from the shared libraries the programs link (dpkg-shlibdeps), plus what cells
# reach on the host at run time: the default template overlays the host's /usr, so
# `run_code` needs the interpreters there, and the egress proxy verifies upstreams with
# the system's CAs.
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
set(CPACK_DEBIAN_PACKAGE_DEPENDS "ca-certificates")
set(CPACK_DEBIAN_PACKAGE_RECOMMENDS "python3, python3-venv, nodejs")
set(CPACK_DEBIAN_PACKAGE_SUGGESTS "mmdebstrap")
set(CPACK_DEBIAN_PACKAGE_CONTROL_EXTRA
    ${PROJECT_BINARY_DIR}/deb/conffiles ${PROJECT_BINARY_DIR}/deb/postinst
    ${PROJECT_BINARY_DIR}/deb/prerm ${PROJECT_BINARY_DIR}/deb/postrm)
set(CPACK_DEBIAN_PACKAGE_CONTROL_STRICT_PERMISSION ON)
include(CPack)
