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

install(FILES ${MCPCELL_DEB_FILES}/mcpcell.service ${MCPCELL_DEB_FILES}/mcpcell.socket
        DESTINATION /lib/systemd/system COMPONENT deb EXCLUDE_FROM_ALL)
install(FILES ${MCPCELL_DEB_FILES}/default.env DESTINATION /etc/default RENAME mcpcell
        COMPONENT deb EXCLUDE_FROM_ALL)
file(GLOB MCPCELL_SHIPPED_POLICIES CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/policies/*.toml)
install(FILES ${MCPCELL_SHIPPED_POLICIES} DESTINATION /etc/mcpcell/policies
        COMPONENT deb EXCLUDE_FROM_ALL)
file(GLOB MCPCELL_DOCS CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/docs/*.md)
install(FILES ${PROJECT_SOURCE_DIR}/README.md ${MCPCELL_DOCS} DESTINATION share/doc/mcpcell
        COMPONENT deb EXCLUDE_FROM_ALL)

# Who answers for the package, and where the project lives (Debian's Maintainer and
# Homepage fields). The project has no public address yet: Homepage is left out until
# -DMCPCELL_HOMEPAGE=https://... names one.
set(MCPCELL_DEB_MAINTAINER
    "mcpcell maintainers <maintainers@users.noreply.a-seed-65f8c283.example>"
    CACHE STRING "Maintainer field of the Debian package: Name <address>")
set(MCPCELL_HOMEPAGE "" CACHE STRING "Homepage field of the Debian package (empty: none)")

# /usr/share/doc/mcpcell/copyright in Debian's machine-readable format 1.0, and
# changelog.Debian.gz: every Debian package carries both. The license is the tree's
# LICENSE file, its SPDX name given by MCPCELL_LICENSE; the tree has none yet, and the
# copyright file says exactly that rather than naming a license nobody granted.
set(MCPCELL_LICENSE "" CACHE STRING "SPDX name of the license in LICENSE (e.g. Apache-2.0)")
set(MCPCELL_DEB_DOC ${PROJECT_BINARY_DIR}/deb/doc)
string(TIMESTAMP MCPCELL_DEB_YEAR "%Y" UTC)
string(REGEX REPLACE " <.*" "" MCPCELL_DEB_HOLDER "${MCPCELL_DEB_MAINTAINER}")
if(EXISTS ${PROJECT_SOURCE_DIR}/LICENSE AND NOT MCPCELL_LICENSE STREQUAL "")
  file(READ ${PROJECT_SOURCE_DIR}/LICENSE MCPCELL_LICENSE_TEXT)
  string(REGEX REPLACE "\n\n+" "\n.\n" MCPCELL_LICENSE_TEXT "${MCPCELL_LICENSE_TEXT}")
  string(REGEX REPLACE "\n([^\n])" "\n \\1" MCPCELL_LICENSE_TEXT "${MCPCELL_LICENSE_TEXT}")
  set(MCPCELL_LICENSE_NAME ${MCPCELL_LICENSE})
  set(MCPCELL_LICENSE_BODY " ${MCPCELL_LICENSE_TEXT}")
else()
  if(EXISTS ${PROJECT_SOURCE_DIR}/LICENSE)
    message(WARNING "LICENSE exists but MCPCELL_LICENSE (its SPDX name) is not set: the "
                    "package's copyright file says no license is stated")
  endif()
  set(MCPCELL_LICENSE_NAME "none")
  string(CONCAT MCPCELL_LICENSE_BODY
      " The mcpcell source tree states no license (it has no LICENSE file). No permission\n"
      " to use, copy, modify or distribute it is granted by this package until one is\n"
      " chosen; ask the copyright holders.")
endif()
string(CONCAT MCPCELL_COPYRIGHT
       "Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/\n"
       "Upstream-Name: mcpcell\n"
       "Upstream-Contact: ${MCPCELL_DEB_MAINTAINER}\n")
if(NOT MCPCELL_HOMEPAGE STREQUAL "")
  string(APPEND MCPCELL_COPYRIGHT "Source: ${MCPCELL_HOMEPAGE}\n")
endif()
string(APPEND MCPCELL_COPYRIGHT
       "\nFiles: *\nCopyright: ${MCPCELL_DEB_YEAR} ${MCPCELL_DEB_HOLDER}\n"
       "License: ${MCPCELL_LICENSE_NAME}\n\n"
       "License: ${MCPCELL_LICENSE_NAME}\n${MCPCELL_LICENSE_BODY}\n")
file(WRITE ${MCPCELL_DEB_DOC}/copyright "${MCPCELL_COPYRIGHT}")
# The changelog's date is the build's (SOURCE_DATE_EPOCH when set: reproducible builds);
# gzip -9n: no name or time stamp in the .gz, as Debian policy asks.
string(TIMESTAMP MCPCELL_DEB_DATE "%a, %d %b %Y %H:%M:%S +0000" UTC)
file(WRITE ${MCPCELL_DEB_DOC}/changelog.Debian
     "mcpcell (${PROJECT_VERSION}) unstable; urgency=medium\n\n"
     "  * Package built by CPack from the mcpcell source tree (cmake/Packaging.cmake);\n"
     "    the project's own history is its version control log.\n\n"
     " -- ${MCPCELL_DEB_MAINTAINER}  ${MCPCELL_DEB_DATE}\n")
execute_process(COMMAND gzip -9n -c ${MCPCELL_DEB_DOC}/changelog.Debian
                OUTPUT_FILE ${MCPCELL_DEB_DOC}/changelog.Debian.gz RESULT_VARIABLE gzip_rc)
if(NOT gzip_rc EQUAL 0)
  message(FATAL_ERROR "gzip -9n ${MCPCELL_DEB_DOC}/changelog.Debian failed: ${gzip_rc}")
endif()
install(FILES ${MCPCELL_DEB_DOC}/copyright ${MCPCELL_DEB_DOC}/changelog.Debian.gz
        DESTINATION share/doc/mcpcell COMPONENT deb EXCLUDE_FROM_ALL)

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
set(CPACK_PACKAGE_CONTACT "${MCPCELL_DEB_MAINTAINER}")
set(CPACK_DEBIAN_PACKAGE_MAINTAINER "${MCPCELL_DEB_MAINTAINER}")
if(NOT MCPCELL_HOMEPAGE STREQUAL "")
  set(CPACK_DEBIAN_PACKAGE_HOMEPAGE "${MCPCELL_HOMEPAGE}")
endif()
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
