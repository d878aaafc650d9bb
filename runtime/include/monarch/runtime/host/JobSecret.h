//===- JobSecret.h - The job secret shared by a controller and agents -*- C++
//-*-===//
//
// Host agents and the controller that attaches to them must hold the same job
// secret (every connection is authenticated with it, transport/Auth.h). It
// travels as 64 hex digits in a file that only its owner can read, or on
// stdin -- never on a command line or in the environment, where other users
// of the machine could see it.
//
//===----------------------------------------------------------------------===//
#ifndef MONARCH_RUNTIME_HOST_JOBSECRET_H
#define MONARCH_RUNTIME_HOST_JOBSECRET_H

#include "monarch/runtime/util/Status.h"

#include <string>

namespace monarch::host {

/// A new random secret as 64 hex digits.
std::string newSecretHex();

/// The raw secret bytes of `hex` (64 hex digits, surrounding whitespace
/// ignored).
Expected<std::string> secretFromHex(const std::string &hex);

/// Reads a hex secret from `path` ("-" reads one line from stdin). A file
/// must be a regular file whose mode grants nothing to group or others.
Expected<std::string> readSecret(const std::string &path);

/// Writes `hex` to a new file `path` with mode 0600.
Status writeSecretFile(const std::string &path, const std::string &hex);

} // namespace monarch::host

#endif // MONARCH_RUNTIME_HOST_JOBSECRET_H
