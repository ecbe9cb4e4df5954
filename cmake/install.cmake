# Install layout (included from the root CMakeLists.txt).
#   sbin/profilingd, libexec/profilingd/{profilingd-redact,-ftrace,-perf}
#   lib/libprofiling.so.1 (+ include/profiling/profiling.h, libprofiling.pc,
#   lib/cmake/profiling/ for find_package(profiling) -> profiling::profiling)
#   lib/systemd/system/profilingd.{service,socket}, share/man/man{1,3,5,8}
#   etc/profilingd/profilingd.conf (/etc/... when the prefix is /usr)
# Every destination is relative to the prefix so that
# `cmake --install BUILD --prefix DIR` yields a self-contained tree, except
# the config under a /usr prefix (a Debian package), which goes to /etc.
include(CMakePackageConfigHelpers)

# pkg-config: relocatable through ${pcfiledir}.
file(RELATIVE_PATH PD_PC_TO_PREFIX ${CMAKE_INSTALL_FULL_LIBDIR}/pkgconfig ${CMAKE_INSTALL_PREFIX})
string(REGEX REPLACE "/$" "" PD_PC_TO_PREFIX "${PD_PC_TO_PREFIX}")
configure_file(${CMAKE_SOURCE_DIR}/cmake/libprofiling.pc.in
               ${CMAKE_BINARY_DIR}/pkgconfig/libprofiling.pc @ONLY)
install(FILES ${CMAKE_BINARY_DIR}/pkgconfig/libprofiling.pc
        DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)

# CMake package: find_package(profiling) gives profiling::profiling.
set(PD_CMAKE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/profiling)
install(EXPORT profilingTargets NAMESPACE profiling:: DESTINATION ${PD_CMAKE_DIR})
configure_package_config_file(${CMAKE_SOURCE_DIR}/cmake/profilingConfig.cmake.in
  ${CMAKE_BINARY_DIR}/cmake/profilingConfig.cmake INSTALL_DESTINATION ${PD_CMAKE_DIR})
write_basic_package_version_file(${CMAKE_BINARY_DIR}/cmake/profilingConfigVersion.cmake
  VERSION ${PROJECT_VERSION} COMPATIBILITY SameMajorVersion)
install(FILES ${CMAKE_BINARY_DIR}/cmake/profilingConfig.cmake
              ${CMAKE_BINARY_DIR}/cmake/profilingConfigVersion.cmake
        DESTINATION ${PD_CMAKE_DIR})

# systemd units; ExecStart names the installed daemon.
configure_file(${CMAKE_SOURCE_DIR}/policy/systemd/profilingd.service.in
               ${CMAKE_BINARY_DIR}/policy/systemd/profilingd.service @ONLY)
configure_file(${CMAKE_SOURCE_DIR}/policy/systemd/profilingd.socket
               ${CMAKE_BINARY_DIR}/policy/systemd/profilingd.socket COPYONLY)
install(FILES ${CMAKE_BINARY_DIR}/policy/systemd/profilingd.service
              ${CMAKE_BINARY_DIR}/policy/systemd/profilingd.socket
        DESTINATION lib/systemd/system)

# Man pages: every docs/man/NAME.SECTION.
file(GLOB PD_MAN_PAGES CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/docs/man/*.[0-9])
foreach(page IN LISTS PD_MAN_PAGES)
  string(REGEX REPLACE ".*\\.([0-9])$" "\\1" sect "${page}")
  install(FILES ${page} DESTINATION ${CMAKE_INSTALL_MANDIR}/man${sect})
endforeach()

# The default config, the documented one.
if(CMAKE_INSTALL_PREFIX STREQUAL "/usr")
  set(PD_CONF_DEST ${CMAKE_INSTALL_FULL_SYSCONFDIR}/profilingd)
else()
  set(PD_CONF_DEST ${CMAKE_INSTALL_SYSCONFDIR}/profilingd)
endif()
install(FILES ${CMAKE_SOURCE_DIR}/policy/profilingd.conf DESTINATION ${PD_CONF_DEST})

# `cpack -G DEB` in the build dir. Configure with -DCMAKE_INSTALL_PREFIX=/usr
# for a package whose config is /etc/profilingd/profilingd.conf.
set(CPACK_PACKAGE_NAME profilingd)
set(CPACK_PACKAGE_VENDOR "profilingd")
set(CPACK_PACKAGE_CONTACT "profilingd maintainers <profilingd@localhost>")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY
    "On-device profiling trigger daemon: rate-limited, redacted captures for apps")
set(CPACK_PACKAGING_INSTALL_PREFIX ${CMAKE_INSTALL_PREFIX})
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SECTION admin)
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
set(CPACK_DEBIAN_PACKAGE_GENERATE_SHLIBS ON)
set(CPACK_DEBIAN_PACKAGE_CONTROL_STRICT_PERMISSION ON)
# The config is a conffile: an upgrade keeps the admin's edits.
if(IS_ABSOLUTE "${PD_CONF_DEST}")
  set(PD_CONFFILE ${PD_CONF_DEST}/profilingd.conf)
else()
  set(PD_CONFFILE ${CMAKE_INSTALL_PREFIX}/${PD_CONF_DEST}/profilingd.conf)
endif()
file(WRITE ${CMAKE_BINARY_DIR}/debian/conffiles "${PD_CONFFILE}\n")
# Maintainer scripts: enable and start profilingd.socket (and the service)
# as dh_installsystemd would; stop on remove (cmake/debian/).
set(CPACK_DEBIAN_PACKAGE_CONTROL_EXTRA ${CMAKE_BINARY_DIR}/debian/conffiles
    ${CMAKE_SOURCE_DIR}/cmake/debian/postinst ${CMAKE_SOURCE_DIR}/cmake/debian/prerm
    ${CMAKE_SOURCE_DIR}/cmake/debian/postrm)
set(CPACK_GENERATOR DEB)
include(CPack)
