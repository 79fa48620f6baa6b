/*
 * sock.h - non-blocking TCP helpers with deadlines, shared by the tcp
 * bootstrap (and usable by the socket transport).
 *
 * Every helper takes an absolute deadline (mki_now_ns() clock) and returns
 * mkErrTimeout when it passes, mkErrRemote when the peer closed the
 * connection, mkErrSystem on other socket errors; `peer` only names the
 * other side in the message.
 */
#ifndef MKI_SOCK_H
#define MKI_SOCK_H

#include <stddef.h>
#include <stdint.h>
#include "mkernel.h"
#include "bootstrap.h"

mkResult_t mki_sock_listen(union mki_sockaddr *addr, int *fd);
mkResult_t mki_sock_connect(const union mki_sockaddr *addr, uint64_t deadline,
                            const char *peer, int *fd);
/* Wait for one connection on a listening socket. */
mkResult_t mki_sock_accept(int lfd, uint64_t deadline, const char *what,
                           int *fd);
mkResult_t mki_sock_send(int fd, const void *buf, size_t len,
                         uint64_t deadline, const char *peer);
mkResult_t mki_sock_recv(int fd, void *buf, size_t len, uint64_t deadline,
                         const char *peer);
/* Send and receive at the same time (both may be large). */
mkResult_t mki_sock_sendrecv(int sfd, const void *sbuf, size_t slen, int rfd,
                             void *rbuf, size_t rlen, uint64_t deadline,
                             const char *speer, const char *rpeer);
uint64_t mki_deadline_ms(int64_t timeout_ms);

#endif /* MKI_SOCK_H */
